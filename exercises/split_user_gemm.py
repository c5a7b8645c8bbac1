# Exercise file for task `split_user_gemm`: generated from solutions/split_user_gemm.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check split_user_gemm`. Your edits are never overwritten by sync-exercises.
"""The capstone, step 1: decompose. out[b] = W @ concat(E_user[user_of[b]], E_cand[b]) without
multiplying each user's features once per candidate.

W is (M, Ku + Kc), E_user (U, Ku, N), E_cand (B, Kc, N), user_of (B,) int64 (sorted: candidate b's
user; every user has at least one candidate), out (B, M, N). A product over a concatenated K is the
sum of the products over its parts, so with W_u = W[:, :Ku] and W_c = W[:, Ku:]:

    out[b] = W_u @ E_user[user_of[b]] + W_c @ E_cand[b]

The first term depends on the user only: computed once per user it is U GEMMs, not B. At the
published shape (1024 candidates of 15 users, M = 433, Ku = 1178, Kc = 866, N = 256) that is 201
GFLOP in all instead of 464.

Plain PyTorch, no kernel: the grader checks the values and counts the work of every torch operation.
"""

import torch


def split_user_gemm(w, e_user, e_cand, user_of, ku):
    """out (B, M, N) = W @ concat(E_user[user_of[b]], E_cand[b]) for each b, computed decomposed: the
    user GEMM once per user, the candidate GEMM once per candidate, then a gather-add. ``ku`` is Ku,
    where W's user columns end. Returns out, in the inputs' dtype."""
    # TODO: split W's columns at ku; user_out = W_u @ E_user, (U, M, N), once per user; the
    # TODO: candidate part W_c @ E_cand, (B, M, N); then add each candidate's user row of user_out
    # TODO: (look it up in user_of).
    raise NotImplementedError("not implemented yet: split_user_gemm in exercises/split_user_gemm.py")
