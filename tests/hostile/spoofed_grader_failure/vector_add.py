"""Hostile (found by a red-team review): answers the load with a report of its own that says the grader
failed, in the grader's words, with a status a load never ends in. Checked like any other claim: a
learner's report cannot make a row look like the grader's own failure."""

import gc
import json
import time
from multiprocessing.connection import Connection

connections = [o for o in gc.get_objects() if type(o) is Connection]
message = {"kind": "load_failed", "status": "crash", "details": [],
           "summary": "the grader failed on this task (KeyError): its terminal shows why"}  # fmt: skip
connections[0].send_bytes(json.dumps(message).encode())
time.sleep(30)


def vector_add(x, y, out):
    return out
