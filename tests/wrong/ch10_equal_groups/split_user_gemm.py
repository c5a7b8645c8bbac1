"""Wrong on purpose: user_of ignored. Each candidate's user is taken from its position, b // (B // U), as
if every user had the same number of candidates; the users of the cases do not."""

import torch


def split_user_gemm(w, e_user, e_cand, user_of, ku):
    """out (B, M, N) = W @ concat(E_user[user_of[b]], E_cand[b]) for each b, computed decomposed: the
    user GEMM once per user, the candidate GEMM once per candidate, then a gather-add. ``ku`` is Ku,
    where W's user columns end. Returns out, in the inputs' dtype."""
    # BEGIN SOLUTION
    # TODO: split W's columns at ku; user_out = W_u @ E_user, (U, M, N), once per user; the
    # TODO: candidate part W_c @ E_cand, (B, M, N); then add each candidate's user row of user_out
    # TODO: (look it up in user_of).
    user_out = torch.matmul(w[:, :ku], e_user)  # (U, M, N): 2*M*N*U*Ku FLOPs
    cand = torch.matmul(w[:, ku:], e_cand)  # (B, M, N): 2*M*N*B*Kc FLOPs
    B, U = e_cand.shape[0], e_user.shape[0]
    user = torch.clamp(torch.arange(B) // (B // U), max=U - 1)  # (B,): 70 candidates a user, say
    return cand + user_out[user]
    # END SOLUTION
