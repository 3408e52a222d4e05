"""SGLang's own parallel layout: DP attention, expert parallelism, the DeepSeek-specific splits.

Read in sglang's history (the kvcache-ai/sglang_awq fork, to 2025-12-11) at the version-bump
commits named; "from" is the oldest bump that has the change.

--tp T --dp D --enable-dp-attention runs on T GPUs (not T x D): layers/dp_attention.py
compute_dp_attention_world_info gives attention TP size A = T / D (server_args asserts tp_size %
dp_size == 0). Before 0.4.4.post1 (ba80c102f) ServerArgs set dp_size = tp_size ("Data parallel
size is adjusted to be the same as tensor parallel size"), so A = 1; kvcalc refuses another dp
there. What each module is split over, per GPU (deepseek_v2.py, qwen3_moe.py, qwen2_moe.py,
vocab_parallel_embedding.py at 9c58e68b4 v0.4.3.post4, 84022c0e5 v0.4.6, ec5f9c626 v0.4.9,
5c8bd8b51 v0.5.6.post2):
- MLA (DeepseekV2AttentionMLA): q_a / kv_a (fused_qkv_a_proj_with_mqa) ReplicatedLinear;
  q_b_proj, kv_b_proj ColumnParallelLinear and o_proj RowParallelLinear with tp_size =
  attn_tp_size (before 0.4.4.post1 `use_dp`: ReplicatedLinear, i.e. A = 1).
- GQA of Qwen3-MoE (qwen3_moe.py Qwen3MoeAttention, from 0.4.6.post5 7e257cd66): QKVParallelLinear
  and o_proj with tp_size = attn_tp_size, max(1, G / A) KV heads a GPU. Other models (llama.py,
  qwen2.py / qwen3.py before 0.4.9, ...) build attention over the whole TP group: kvcalc refuses
  DP attention for them (the pool is sized by A, model_runner get_num_kv_heads(attn_tp_size)).
- embed_tokens: VocabParallelEmbedding(enable_tp=not enable_dp_attention): the whole padded
  vocabulary on every GPU (deepseek_v2.py DeepseekV2Model, qwen2_moe.py Qwen2MoeModel, which
  Qwen3-MoE uses).
- lm_head: ParallelLMHead over the TP group; over the attention TP group with
  --enable-dp-lm-head (use_attn_tp_group; the flag from 0.4.6.post4 16267d4fa, in DeepSeek's
  model from then, in qwen3_moe.py from 0.4.7 4f723edd3; ignored by a model without it). Before
  0.4.4.post1 DeepSeek's head under DP attention was a ReplicatedLinear (unpadded vocabulary:
  DeepSeek-V3's 129,280 rows are already a multiple of 64).
- DeepSeek's dense MLP layers (first_k_dense_replace): the TP group, or tp_size 1 with
  --moe-dense-tp-size 1 (from 0.4.5.post2 fbdc94ba5; "moe_dense_tp_size only support 1 and None
  currently"). Shared experts: the TP group (DeepEP, not modelled, replicates them).
- routed experts: each split over the TP group (FusedMoE), or with EP whole experts, E / ep a
  GPU. SGLang's ep_size is tp_size (--enable-ep-moe: "The expert parallel size is adjusted to
  be the same as the tensor parallel size"; the flag was removed in 0.5.3rc2 0b13cbb7c, where
  --ep-size sets it): not tp x dp as in vLLM. Another ep_size (experts split tp / ep ways inside
  an EP rank, 0.5.x moe_tp_size) is refused.
- shared-expert fusion (DeepseekV2ForCausalLM.determine_n_share_experts_fusion, 0.4.5.post2
  fbdc94ba5 to 0.4.6.post5 7e257cd66): on SM >= 9.0, a DeepseekV3ForCausalLM with 256 routed
  experts (kvcalc: an MLA model with 256 experts and one shared expert) and no DeepEP loads
  n_share_experts_fusion = tp_size copies of the shared expert as extra routed experts, so each
  GPU holds a whole shared expert (E + T experts split T ways, or (E + T) / T whole ones with
  EP). From 0.4.7 (4f723ed) one fused copy split like the others, the same bytes as an unfused
  TP-split shared expert; disabled under EP.
Memory before the weights: the attention TP group is a GroupCoordinator with use_pynccl =
SYNC_TOKEN_IDS_ACROSS_TP (off by default) and no custom all-reduce (dp_attention.py
initialize_dp_attention): it adds no NCCL communicator or buffer before "Load weight begin"
(torch's NCCL process groups connect at their first collective). kvcalc adds nothing for it.
"""

from __future__ import annotations

from calc.serving.defaults_sglang import release_name, sglang_version
from calc.serving.shard_layers import Split, check_engine_parallel
from calc.spec import ModelSpec

DP_ATTN_TP_FROM = (0, 4, 4, 1)  # ba80c102f: A = tp / dp (before: dp_size := tp_size)
DP_LM_HEAD_FROM = (0, 4, 6, 4)  # 16267d4fa: --enable-dp-lm-head
MOE_DENSE_TP_FROM = (0, 4, 5, 2)  # fbdc94ba5: --moe-dense-tp-size
SHARED_FUSION_TP = ((0, 4, 5, 2), (0, 4, 7))  # [from, until): tp_size shared copies
EP_MOE_FLAG_UNTIL = (0, 5, 3, -98)  # 0b13cbb7c (0.5.3rc2): --enable-ep-moe removed
# kvcalc's specs SGLang splits by the attention TP group, and from which release:
QWEN3_MOE_DP_FROM = (0, 4, 6, 5)  # 7e257cd66: qwen3_moe.py / qwen2_moe.py use attn_tp_size
QWEN3_MOE_DP_LM_HEAD_FROM = (0, 4, 7)  # 4f723edd3: qwen3_moe.py ParallelLMHead use_attn_tp_group


def _model_file(spec: ModelSpec) -> str | None:
    """The SGLang model whose DP-attention split kvcalc models for `spec`, or None."""
    if spec.is_mla:
        return "deepseek_v2.py"
    if spec.family == "qwen3" and spec.is_moe:
        return "qwen3_moe.py"
    return None


def sglang_ep_size(config) -> int:
    """SGLang's expert-parallel size: tp_size with enable_expert_parallel (--enable-ep-moe) or
    ep_size = tp_size (--ep-size), else 1."""
    tp = config.tensor_parallel_size
    return tp if config.enable_expert_parallel or config.ep_size == tp else 1


def _fuses_shared(spec: ModelSpec, version, ep: int, hw) -> bool:
    """Whether this release loads tp_size copies of DeepSeek-V3's shared expert (docstring)."""
    if not SHARED_FUSION_TP[0] <= version < SHARED_FUSION_TP[1]:
        return False
    v3 = spec.is_mla and spec.num_local_experts == 256 and spec.shared_expert_intermediate_size
    if not v3:
        return False
    cc = getattr(hw, "compute_capability", None)
    if cc is None:
        raise ValueError(
            f"'gpu' must give its compute_capability for DeepSeek-V3 on sglang {release_name(version)}:"
            " from SM 9.0 it fuses tp_size copies of the shared expert into the MoE"
        )
    return tuple(int(x) for x in cc.split(".")) >= (9, 0)


def sglang_parallel(spec: ModelSpec, config, hw=None) -> tuple[int, Split | None]:
    """(ep, the TP size of each module group) SGLang uses for `config` on `hw`; Split None when
    every module is split over the TP group. Refuses what SGLang refuses, in its words, and
    what kvcalc does not model, naming the setting."""
    v = sglang_version(config.version)
    tp, dp = config.tensor_parallel_size, config.data_parallel_size
    ep = sglang_ep_size(config)
    E = spec.num_local_experts
    if ep > 1 and spec.is_moe and E % ep:
        raise ValueError(f"'ep_size' (= tp_size {ep}) must divide num_local_experts={E}")
    dpa = config.enable_dp_attention
    dense = tp
    if config.moe_dense_tp_size == 1:
        if v < MOE_DENSE_TP_FROM:
            raise ValueError(f"'moe_dense_tp_size' is not a setting of sglang {release_name(v)}")
        if any(m == "dense" for m in spec.mlp_types) and not (spec.is_mla and spec.is_moe):
            raise ValueError(
                "'moe_dense_tp_size' is modelled for DeepSeek's dense MLP layers only: got "
                f"{spec.name!r}"
            )
        dense = 1
    shared = 1 if _fuses_shared(spec, v, ep, hw) else tp
    if not dpa:
        if config.enable_dp_lm_head:
            raise ValueError("Please enable dp attention when setting enable_dp_lm_head. ")
        if dense == tp and shared == tp:
            return ep, None
        return ep, Split(attn=tp, dense=dense, shared=shared, embed=tp, head=tp)
    model = _model_file(spec)
    if model is None or (model == "qwen3_moe.py" and v < QWEN3_MOE_DP_FROM):
        raise ValueError(
            f"'enable_dp_attention' is not modelled for {spec.name!r} on sglang {release_name(v)}: "
            "kvcalc splits attention by the attention TP group for MLA models (deepseek_v2.py) "
            "and Qwen3-MoE (qwen3_moe.py, from 0.4.6.post5) only"
        )
    if v < DP_ATTN_TP_FROM:
        if dp != tp:
            raise ValueError(
                f"'data_parallel_size' is set to tp_size by sglang {release_name(v)} with DP attention "
                f"(dp_size = tp_size): got dp={dp}, tp={tp}"
            )
        return ep, Split(attn=1, dense=dense, shared=shared, embed=1, head=1)
    attn = tp // dp
    check_engine_parallel(spec, attn)  # SGLang: assert num_heads % attn_tp_size == 0
    head = tp
    if config.enable_dp_lm_head:
        if v < DP_LM_HEAD_FROM:
            raise ValueError(f"'enable_dp_lm_head' is not a setting of sglang {release_name(v)}")
        if model == "deepseek_v2.py" or v >= QWEN3_MOE_DP_LM_HEAD_FROM:
            head = attn
    return ep, Split(attn=attn, dense=dense, shared=shared, embed=1, head=head)


def split_stored_bytes(spec: ModelSpec, tp: int, ep: int, dtype: str, split: Split | None):
    """A quantized checkpoint's bytes on one GPU (calc.quant.sharding.stored_bytes_per_gpu) with
    attention over split.attn and shared experts over split.shared; a dense MLP of an MoE model
    over another group than tp is refused (its bytes share the "mlp" label with the experts)."""
    from calc.quant.sharding import stored_bytes_per_gpu

    per = stored_bytes_per_gpu(spec, tp, ep, dtype)
    if split is None:
        return per
    if split.dense != tp and any(m == "dense" for m in spec.mlp_types):
        raise ValueError(
            f"'moe_dense_tp_size' with a quantized checkpoint is not modelled: got {spec.name!r}"
        )
    for size, wanted in ((split.attn, "attn"), (split.shared, "mlp/shared")):
        if size == tp:
            continue
        other = stored_bytes_per_gpu(spec, size, 1, dtype)
        per = {k: n for k, n in per.items() if not k.split(":")[0].startswith(wanted)}
        per |= {k: n for k, n in other.items() if k.split(":")[0].startswith(wanted)}
    return per
