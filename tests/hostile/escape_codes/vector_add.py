"""Hostile (found by a red-team review): an exception whose text holds terminal escape sequences
(cursor up, erase the line, a fake PASS line, a window title, a clipboard write), to forge the lines an
instructor reads in a terminal, the CSV and the summary. A learner's text is shown with its control
characters written out."""


def vector_add(x, y, out):
    return out


raise RuntimeError("\x1b[1A\x1b[2K\rPASS  vector_add 10 cases passed \x1b]0;owned\x07\x1b]52;c;ZWNobyBwd25lZA==\x07")
