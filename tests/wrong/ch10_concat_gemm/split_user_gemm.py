"""Wrong on purpose: not decomposed. Each candidate's user features are copied beside its own
(torch.cat) and W multiplies the whole concatenation: the values are right, but the user GEMM runs
once per candidate (2.3x the FLOPs at the published shape)."""

import torch


def split_user_gemm(w, e_user, e_cand, user_of, ku):
    """out (B, M, N) = W @ concat(E_user[user_of[b]], E_cand[b]) for each b, computed decomposed: the
    user GEMM once per user, the candidate GEMM once per candidate, then a gather-add. ``ku`` is Ku,
    where W's user columns end. Returns out, in the inputs' dtype."""
    # BEGIN SOLUTION
    # TODO: split W's columns at ku; user_out = W_u @ E_user, (U, M, N), once per user; the
    # TODO: candidate part W_c @ E_cand, (B, M, N); then add each candidate's user row of user_out
    # TODO: (look it up in user_of).
    features = torch.cat([e_user[user_of], e_cand], dim=1)  # (B, Ku + Kc, N)
    return torch.matmul(w, features)  # (B, M, N)
    # END SOLUTION
