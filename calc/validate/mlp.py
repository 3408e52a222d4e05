"""The MLPs of the reference decoder: dense (gated or 2-matrix) and mixture of experts.

`MoE` covers Mixtral (softmax router, top-k, renormalized), Qwen2/3-MoE and DeepSeek shared
experts (`shared_experts`, always on; Qwen2-MoE's sigmoid `shared_expert_gate` h -> 1 scales
them), gpt-oss's router bias (`router` has one) and DeepSeek-V3's `e_score_correction_bias`
(a buffer: it steers selection, is stored in the checkpoint, and is no parameter). Names map onto
kvcalc's components: experts "mlp", shared experts and their gate "mlp/shared", router "router".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from calc.spec import ModelSpec


def _activation(name: str):
    if name.startswith("gelu"):
        return F.gelu
    if name in ("relu", "relu2"):
        return F.relu
    return F.silu  # silu / swish (SwiGLU)


class MLP(nn.Module):
    """Gated: down(act(gate(x)) * up(x)) (SwiGLU/GeGLU); standard: down(act(up(x))) (GPT)."""

    def __init__(self, spec: ModelSpec, width: int | None = None, bias: bool | None = None):
        super().__init__()
        h = spec.hidden_size
        f = spec.intermediate_size if width is None else width
        bias = spec.mlp_bias if bias is None else bias
        self.gated = spec.mlp_kind == "gated"
        self.act = _activation(spec.hidden_act)
        if self.gated:
            self.gate_proj = nn.Linear(h, f, bias=bias)
        self.up_proj = nn.Linear(h, f, bias=bias)
        self.down_proj = nn.Linear(f, h, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = self.up_proj(x)
        a = self.act(self.gate_proj(x)) * up if self.gated else self.act(up)
        return self.down_proj(a)


class MoE(nn.Module):
    """A sparse MLP: router, `num_local_experts` experts of which top-k run per token, and the
    optional shared experts.

    Each expert runs only on the tokens routed to it, so the matmul FLOPs are those of
    n * k expert passes plus the router and shared experts, as kvcalc counts. On the `meta`
    device there are no values to route by, so token t goes to experts (t*k + j) mod E, j < k:
    the same n * k (token, expert) pairs, hence the same FLOPs (a test checks meta against a
    routed CPU run).
    """

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, E = spec.hidden_size, spec.num_local_experts
        self.top_k = spec.num_experts_per_tok
        self.router = nn.Linear(h, E, bias=spec.router_bias)
        self.sigmoid_scores = spec.e_score_correction_bias  # DeepSeek-V3: sigmoid, biased pick
        if spec.e_score_correction_bias:
            self.register_buffer("e_score_correction_bias", torch.zeros(E))
        width = spec.expert_intermediate_size
        self.experts = nn.ModuleList(MLP(spec, width, bias=spec.expert_bias) for _ in range(E))
        fs = spec.shared_expert_intermediate_size
        if fs is not None:
            self.shared_experts = MLP(spec, fs)
            if spec.shared_expert_gate:
                self.shared_expert_gate = nn.Linear(h, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, n, h = x.shape
        flat = x.reshape(B * n, h)
        logits = self.router(flat)  # [T, E]
        out = torch.zeros_like(flat)
        for e, (tokens, weight) in enumerate(self._routes(logits)):
            if tokens.numel():
                y = self.experts[e](flat.index_select(0, tokens))
                out.index_add_(0, tokens, y * weight[:, None])
        if hasattr(self, "shared_experts"):
            shared = self.shared_experts(flat)
            if hasattr(self, "shared_expert_gate"):
                shared = shared * torch.sigmoid(self.shared_expert_gate(flat))
            out = out + shared
        return out.view(B, n, h)

    def _routes(self, logits: torch.Tensor):
        T, E = logits.shape
        k = self.top_k
        if logits.device.type == "meta":
            pairs = [[] for _ in range(E)]
            for t in range(T):
                for j in range(k):
                    pairs[(t * k + j) % E].append(t)
            for tokens in pairs:
                idx = torch.tensor(tokens, dtype=torch.long, device="meta")
                yield idx, torch.empty(len(tokens), dtype=logits.dtype, device="meta")
            return
        if self.sigmoid_scores:  # pick by score + correction bias, weigh by the score alone
            probs = torch.sigmoid(logits)
            top_e = torch.topk(probs + self.e_score_correction_bias, k, dim=-1).indices
            top_w = probs.gather(1, top_e)
        else:
            probs = torch.softmax(logits, dim=-1)
            top_w, top_e = torch.topk(probs, k, dim=-1)  # [T, k]
        top_w = top_w / top_w.sum(dim=-1, keepdim=True)
        for e in range(E):
            tok, slot = (top_e == e).nonzero(as_tuple=True)
            yield tok, top_w[tok, slot]
