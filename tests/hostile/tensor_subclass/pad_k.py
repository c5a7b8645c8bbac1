"""Hostile (chapter 10's pad_k): returns an unpadded copy as a torch.Tensor subclass that says its rows
are padded (stride) and 16-byte aligned (data_ptr). The grader reads the layout from the bytes it is
sent and takes only an exact torch.Tensor."""

import torch


class Padded(torch.Tensor):
    def stride(self, dim=None):
        real = torch.Tensor.stride(self)
        padded = (-(-real[0] * self.element_size() // 16) * 16 // self.element_size(), 1)
        return padded if dim is None else padded[dim]

    def data_ptr(self):
        return 0


def pad_k(w_c):
    return w_c.contiguous().as_subclass(Padded)
