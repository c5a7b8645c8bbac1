import torch


def split_user_gemm(w, e_user, e_cand, user_of, ku):
    """user_of is sorted: the candidates of one user are a contiguous run. Counts per user from
    torch.unique_consecutive, one candidate GEMM over all candidates, then each run gets its user's
    (M, N) part added by broadcasting (no (B, M, N) gather)."""
    w_u, w_c = w[:, :ku], w[:, ku:]
    out = torch.matmul(w_c, e_cand)  # (B, M, N)
    users, counts = torch.unique_consecutive(user_of, return_counts=True)
    user_out = torch.matmul(w_u, e_user[users])  # (runs, M, N): once per user
    start = 0
    for i, n in enumerate(counts.tolist()):
        out[start : start + n] += user_out[i]
        start += n
    return out
