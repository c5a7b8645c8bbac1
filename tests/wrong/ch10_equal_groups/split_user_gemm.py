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


# --------------------------------------------------------------------------------------------------
# Given: how the grader calls split_user_gemm (keep it as it is). The grader's own process makes each
# case's tensors and sends them as plain numbers; run_case rebuilds them here, on the CPU, runs your
# function and sends the result back as its dtype, shape and bytes. The grader compares them with its
# own reference. Try your function directly in a notebook instead.

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int64": torch.int64}


def _tensor(data):
    dtype = _DTYPES[data["dtype"]]
    made = torch.tensor(data["values"], dtype=torch.float64 if dtype.is_floating_point else torch.int64)
    return made.to(dtype).reshape(data["shape"])


def run_case(w, e_user, e_cand, user_of, ku):
    out = split_user_gemm(_tensor(w), _tensor(e_user), _tensor(e_cand), _tensor(user_of), ku)
    if not isinstance(out, torch.Tensor):
        return ["not a tensor", str(type(out))]
    data = out.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return [str(out.dtype), list(out.shape), data.hex()]
