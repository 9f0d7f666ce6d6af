"""Imports the release's own modules (nanochat/*.py, scripts/base_eval.py of a checkout given on the
command line) under Debian's torch 1.13, the Python of scripts/core_reference/*.py.

Torch 1.13 lacks some things the release uses; the stand-ins below are installed before the release's
modules are imported. They live only here, in this process; nothing is written into the release:

  F.rms_norm                     torch >= 2.4; aten's composite: x * rsqrt(mean(x^2) + eps) in the
                                 op-math type (float32 for float32/bf16), eps = that type's epsilon
  F.scaled_dot_product_attention torch >= 2.0 (enable_gqa: >= 2.5); torch's documented reference
                                 ("math") implementation: bool mask -> -inf bias, softmax in the input
                                 dtype, K/V heads repeated (repeat_interleave) for GQA
  torch.compile                  torch >= 2.0; identity (only decorates the release's optimizer steps)
  torch.compiler.disable         torch >= 2.1; identity (decorates flash_attn_with_kvcache)
  module filelock                not packaged; nanochat.common imports FileLock (used only to download)

and, for scripts/base_eval.py (whose evaluate_core is called as is), placeholder modules for the
nanochat modules it imports but evaluate_core does not use (tokenizer, checkpoint_manager, dataloader,
dataset, engine: they need tokenizers, rustbpe, tiktoken, pyarrow, requests). A placeholder raises if
anything of it is called.
"""
import importlib.util
import math
import os
import sys
import types

import torch
import torch.nn.functional as F


def _rms_norm(input, normalized_shape, weight=None, eps=None):
    dims = tuple(range(-len(normalized_shape), 0))
    opmath = torch.float64 if input.dtype == torch.float64 else torch.float32
    if eps is None:
        eps = torch.finfo(opmath).eps
    x = input.to(opmath)
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    if weight is not None:
        y = y * weight
    return y.to(input.dtype)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    assert dropout_p == 0.0
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    attn_bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        assert attn_mask is None
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=0)
        attn_bias.masked_fill_(causal.logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_bias.masked_fill_(attn_mask.logical_not(), float("-inf"))
        else:
            attn_bias = attn_mask + attn_bias
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
    else:
        assert query.size(-3) == key.size(-3), "heads differ without enable_gqa (torch 2 would raise)"
    attn_weight = query @ key.transpose(-2, -1) * scale_factor
    attn_weight = attn_weight + attn_bias
    attn_weight = torch.softmax(attn_weight, dim=-1)
    return attn_weight @ value


def _compile(model=None, **kwargs):
    return (lambda f: f) if model is None else model


def _disable(fn=None, recursive=True):
    return (lambda f: f) if fn is None else fn


STAND_INS = []  # what install_stand_ins put in place
_installed = False


def install_stand_ins():
    global _installed
    if _installed:
        return
    _installed = True
    if not hasattr(F, "rms_norm"):
        F.rms_norm = _rms_norm
        STAND_INS.append("F.rms_norm")
    if not hasattr(F, "scaled_dot_product_attention"):
        F.scaled_dot_product_attention = _sdpa
        STAND_INS.append("F.scaled_dot_product_attention")
    if not hasattr(torch, "compile"):
        torch.compile = _compile
        STAND_INS.append("torch.compile")
    if not hasattr(torch, "compiler"):
        torch.compiler = types.SimpleNamespace(disable=_disable)
        STAND_INS.append("torch.compiler.disable")
    try:
        import filelock  # noqa: F401
    except ImportError:
        m = types.ModuleType("filelock")

        class FileLock:
            def __init__(self, *a, **k):
                raise RuntimeError("filelock stand-in: downloads are not supported here")

        m.FileLock = FileLock
        sys.modules["filelock"] = m
        STAND_INS.append("filelock")


def _placeholder(name, attrs):
    m = types.ModuleType(name)
    for a in attrs:
        def f(*args, _a=a, **kwargs):
            raise RuntimeError(f"placeholder {name}.{_a} called (not needed for CORE)")
        setattr(m, a, f)
    return m


def load_release(release_dir, with_base_eval=False):
    """Returns a namespace with the release's modules: core_eval, gpt (and base_eval when asked)."""
    release_dir = os.path.abspath(release_dir)
    for f in ("nanochat/core_eval.py", "nanochat/gpt.py", "nanochat/flash_attention.py", "scripts/base_eval.py"):
        if not os.path.isfile(os.path.join(release_dir, f)):
            sys.exit(f"--release {release_dir}: no {f} (export the release there first, see README.md)")
    install_stand_ins()
    sys.path.insert(0, release_dir)
    import nanochat.core_eval as core_eval
    import nanochat.gpt as gpt
    ns = types.SimpleNamespace(core_eval=core_eval, gpt=gpt, base_eval=None, dir=release_dir)
    if with_base_eval:
        for name, attrs in {
            "nanochat.tokenizer": ["HuggingFaceTokenizer", "get_token_bytes", "get_tokenizer"],
            "nanochat.checkpoint_manager": ["load_model"],
            "nanochat.dataloader": ["tokenizing_distributed_data_loader_bos_bestfit"],
            "nanochat.dataset": ["set_dataset"],
            "nanochat.engine": ["Engine"],
        }.items():
            sys.modules.setdefault(name, _placeholder(name, attrs))
        spec = importlib.util.spec_from_file_location("release_base_eval", os.path.join(release_dir, "scripts/base_eval.py"))
        base_eval = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(base_eval)
        ns.base_eval = base_eval
    return ns
