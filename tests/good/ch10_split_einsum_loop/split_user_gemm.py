"""Correct, written differently from the solution: the user GEMM as one einsum per user (a loop over
the users, not the candidates), the candidate GEMM as an einsum, the gather with index_select. It must
pass: it is decomposed."""

import torch


def split_user_gemm(w, e_user, e_cand, user_of, ku):
    w_u, w_c = w[:, :ku], w[:, ku:]
    user_out = torch.stack([torch.einsum("mk,kn->mn", w_u, e_user[u]) for u in range(e_user.shape[0])])  # (U, M, N)
    cand = torch.einsum("mk,bkn->bmn", w_c, e_cand)  # (B, M, N)
    return cand + torch.index_select(user_out, 0, user_of)
