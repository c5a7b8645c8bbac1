"""Wrong on purpose: not decomposed, and written to hide it from a FLOP counter. Each candidate's user
part is a broadcast multiply and a sum (no matrix product, so torch's FLOP counter sees 0 FLOPs), and
a dummy matmul of the decomposed size makes the count look right. The values are right; the user part
is still computed once per candidate."""

import torch


def split_user_gemm(w, e_user, e_cand, user_of, ku):
    """out (B, M, N) = W @ concat(E_user[user_of[b]], E_cand[b]) for each b, computed decomposed: the
    user GEMM once per user, the candidate GEMM once per candidate, then a gather-add. ``ku`` is Ku,
    where W's user columns end. Returns out, in the inputs' dtype."""
    # BEGIN SOLUTION
    # TODO: split W's columns at ku; user_out = W_u @ E_user, (U, M, N), once per user; the
    # TODO: candidate part W_c @ E_cand, (B, M, N); then add each candidate's user row of user_out
    # TODO: (look it up in user_of).
    w_u, w_c = w[:, :ku], w[:, ku:]
    per_candidate = e_user[user_of]  # (B, Ku, N)
    user_part = (w_u[None, :, :, None] * per_candidate[:, None, :, :]).sum(dim=2)  # (B, M, N), per candidate
    torch.matmul(w_u, e_user)  # the decomposed user GEMM's FLOPs, for the counter, thrown away
    return torch.matmul(w_c, e_cand) + user_part
    # END SOLUTION
