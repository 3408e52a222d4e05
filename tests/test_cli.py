"""`kvcalc`: tables with units, `--json` equal to the API, one-line errors with exit status 2.

Most tests call `main([...])` in-process; a few run `python -m calc` as a subprocess to see what
a shell sees (exit status, stderr, no traceback, no torch/pandas imported).
"""

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import calc
from calc import cli
from calc.cli import args as cli_args
from calc.cli import output as cli_output
from calc.errata import check_errata

ROOT = Path(__file__).resolve().parents[1]
# the module calc/cli/main.py (the name calc.cli.main is the function it defines)
cli_main = importlib.import_module("calc.cli.main")
L3_70B_8K = 2 * 80 * 8 * 128 * 8192 * 2  # Llama 3 70B config.json: 80 layers, 8 KV heads x 128


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --- kv ----------------------------------------------------------------------------------------


def test_kv_states_bytes_in_both_units(capsys):
    rc, out, err = run(capsys, "kv", "llama-3-70b", "--seq", "8192")
    assert (rc, err) == (0, "")
    assert "2,684,354,560 B = 2.68 GB = 2.50 GiB" in out  # = L3_70B_8K
    assert "327,680 B" in out  # per token: 2 * 80 * 8 * 128 * 2
    assert "80 full-attention layers" in out


def test_kv_json_matches_the_api(capsys):
    rc, out, _ = run(capsys, "kv", "llama-3-70b", "--seq", "8192", "--batch", "3", "--json")
    data = json.loads(out)
    assert data == calc.kv_cache(calc.load_preset("llama-3-70b"), 8192, 3).model_dump()
    assert data["total_bytes"] == 3 * L3_70B_8K


def test_json_flag_before_the_command(capsys):
    rc, out, _ = run(capsys, "--json", "kv", "llama-3-70b", "--seq", "8192")
    assert rc == 0 and json.loads(out)["total_bytes"] == L3_70B_8K


def test_kv_dtype_alias_and_paged_blocks(capsys):
    rc, out, _ = run(
        capsys, "kv", "llama-3-70b", "--seq", "8193", "--dtype", "float16", "--block-size", "16"
    )
    assert rc == 0
    # 8193 tokens round up to 513 blocks of 16 (16 * 512 = 8192, plus one) = 8208 tokens
    assert f"{2 * 80 * 8 * 128 * 8208 * 2:,} B" in out
    assert "fp16" in out and "blocks of 16 tokens" in out


def test_kv_sliding_layers_are_noted(capsys):
    # Gemma 2 9B config.json: 42 layers alternating sliding (window 4096) / global, 8 KV x 256
    rc, out, _ = run(capsys, "kv", "gemma-2-9b", "--seq", "8192")
    full = 21 * 2 * 8 * 256 * 8192 * 2
    sliding = 21 * 2 * 8 * 256 * 4096 * 2
    assert f"{full + sliding:,} B" in out
    assert "21 sliding layers (window 4,096)" in out
    rc, out, _ = run(capsys, "kv", "gemma-2-9b", "--seq", "8192", "--window-tokens", "window-1")
    assert f"{full + 21 * 2 * 8 * 256 * 4095 * 2:,} B" in out  # transformers keeps window - 1


def test_model_from_a_config_json(capsys, tmp_path):
    # Meta-Llama-3-70B config.json (huggingface.co/meta-llama/Meta-Llama-3-70B), shape keys
    config = {
        "model_type": "llama",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    rc, out, _ = run(capsys, "kv", str(path), "--seq", "8192", "--json")
    assert rc == 0 and json.loads(out)["total_bytes"] == L3_70B_8K
    path.write_text(json.dumps({**config, "model_type": "t5"}), encoding="utf-8")
    rc, out, err = run(capsys, "show", str(path))
    assert rc == 2 and err.count("\n") == 1 and "t5" in err


# --- attention, compare, show, presets, errata --------------------------------------------------


def test_attention(capsys):
    rc, out, _ = run(capsys, "attention", "llama-3-70b", "--seq", "8192")
    assert rc == 0
    # decode step: QK^T and AV each 2 * H * d per key; 64 heads x 128, 8192 keys, 80 layers
    assert f"{4 * 64 * 128 * 8192 * 80:,} FLOPs" in out
    # one layer's score matrix: 64 heads x 8192 x 8192 x 2 B = 8 GiB
    assert "8,589,934,592 B = 8.59 GB = 8.00 GiB" in out
    rc, out, _ = run(capsys, "attention", "llama-3-70b", "--seq", "8192", "--json")
    spec = calc.load_preset("llama-3-70b")
    assert json.loads(out) == calc.attention_cost(spec, 8192).model_dump()


def test_compare(capsys):
    rc, out, _ = run(capsys, "compare", "llama-2-70b", "--seq", "4096")
    assert rc == 0
    assert f"{2 * 80 * 64 * 128 * 4096 * 2:,} B" in out  # as MHA: 64 KV heads
    assert f"{2 * 80 * 1 * 128 * 4096 * 2:,} B" in out  # as MQA: 1 KV head
    assert "87.50%" in out  # 1 - 8/64
    assert "GQA *" in out
    rc, out, _ = run(capsys, "compare", "llama-2-70b", "--json")
    data = json.loads(out)
    assert data == calc.compare_attention(calc.load_preset("llama-2-70b")).model_dump()
    assert data["seq_len"] == 4096  # Llama 2 context (config.json max_position_embeddings)


def test_show(capsys):
    rc, out, _ = run(capsys, "show", "llama-3-70b")
    assert rc == 0
    assert "https://huggingface.co/meta-llama/Meta-Llama-3-70B" in out
    assert f"{128256 * 8192:,}" in out  # embed: vocab 128256 x hidden 8192
    assert "GQA" in out and "total" in out
    rc, out, _ = run(capsys, "show", "llama-3-70b", "--json")
    data = json.loads(out)
    spec = calc.load_preset("llama-3-70b")
    assert data["params"] == calc.params_report(spec).model_dump()
    assert calc.ModelSpec.model_validate(data["spec"]) == spec


def test_show_moe_gives_active_params(capsys):
    rc, out, _ = run(capsys, "show", "mixtral-8x7b")
    assert rc == 0 and "active per token (2 of 8 experts)" in out


def test_presets(capsys):
    rc, out, _ = run(capsys, "presets")
    assert rc == 0
    for name in calc.list_presets():
        assert name in out
    rc, out, _ = run(capsys, "presets", "--json")
    data = json.loads(out)
    assert [d["name"] for d in data] == calc.list_presets()
    palm = next(d for d in data if d["name"] == "palm-540b")
    assert (palm["num_attention_heads"], palm["num_key_value_heads"]) == (48, 1)  # PaLM Table 1


def test_errata(capsys):
    rc, out, _ = run(capsys, "errata")
    assert rc == 0
    assert "48 / 1 MQA" in out and "128 / 8 GQA" in out
    assert "5.37 GB = 5.00 GiB" in out and "2.68 GB = 2.50 GiB" in out
    rc, out, _ = run(capsys, "errata", "--json")
    assert json.loads(out) == check_errata().model_dump()


def test_help_and_version_exit_0(capsys):
    assert cli.main(["--version"]) == 0
    assert calc.__version__ in capsys.readouterr().out
    assert cli.main(["kv", "-h"]) == 0
    assert "--block-size" in capsys.readouterr().out


# --- bad input: one line, exit 2 ----------------------------------------------------------------


@pytest.fixture
def bad_files(tmp_path):
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "kv5.toml").write_text(
        'name = "x"\nnum_hidden_layers = 2\nhidden_size = 64\nnum_attention_heads = 8\n'
        "num_key_value_heads = 5\nintermediate_size = 128\nvocab_size = 100\n",
        encoding="utf-8",
    )
    (tmp_path / "neg.toml").write_text(
        'name = "x"\nnum_hidden_layers = -1\nhidden_size = 64\nnum_attention_heads = 8\n'
        "intermediate_size = 128\nvocab_size = 100\n",
        encoding="utf-8",
    )
    llama = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128}
    llama |= {"num_attention_heads": 8, "vocab_size": 100, "num_hidden_layers": 10**12}
    (tmp_path / "huge.json").write_text(json.dumps(llama), encoding="utf-8")
    (tmp_path / "deep.json").write_text("[" * 10_000 + "]" * 10_000, encoding="utf-8")
    (tmp_path / "utf16.json").write_bytes(json.dumps(llama).encode("utf-16"))
    return tmp_path


BAD = [  # argv, a fragment the message must contain
    (["kv", "llama-9-1b", "--seq", "1"], "unknown preset 'llama-9-1b'"),
    (["kv", "llama-3-70b", "--seq", "1", "--dtype", "fp12"], "'fp12'"),
    (
        ["kv", "llama-3-70b", "--seq", "-5"],
        "--seq: must be an integer from 0 to 2,147,483,648: got '-5'",
    ),
    (["kv", "llama-3-70b", "--seq", "8k"], "got '8k'"),
    (
        ["kv", "llama-3-70b", "--seq", "1", "--batch", "0"],
        "--batch: must be an integer from 1 to 16,777,216",
    ),
    (["kv", "llama-3-70b", "--seq", "1", "--block-size", "0"], "--block-size"),
    (["kv", "llama-3-70b"], "required: --seq"),
    (["kv", "llama-3-70b", "--seq", "1", "--window-tokens", "w"], "--window-tokens"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    ([], "required: COMMAND"),
    (["show", "{d}/missing/config.json"], "no such file"),
    (["show", "{d}/broken.json"], "malformed JSON"),
    (["show", "{d}/list.json"], "expected a JSON object"),
    (["show", "{d}/kv5.toml"], "'num_key_value_heads' must divide num_attention_heads=8: got 5"),
    (["show", "{d}/neg.toml"], "'num_hidden_layers'"),
    # sizes are bounded (calc.limits), not printed as "2684354559999999.50 YB"
    (
        ["kv", "llama-3-70b", "--seq", "8192", "--batch", str(10**30)],
        "argument --batch: must be <= 16,777,216: got 1.00e+30",
    ),
    (
        ["kv", "llama-3-70b", "--seq", str(2**31 + 1)],
        "argument --seq: must be <= 2,147,483,648: got 2,147,483,649",
    ),
    (["show", "{d}/huge.json"], "huge.json: 'num_hidden_layers' must be <= 10,000: got 1,000,000,"),
    (["show", "{d}/deep.json"], "deep.json: JSON nested more than 64 levels deep"),
    (["show", "{d}/utf16.json"], "utf16.json: file is not UTF-8 text: it is UTF-16"),
    # a directory is a directory, not an "unknown preset"
    (["show", "{d}"], "is a directory, not a file"),
    (["show", "{d}/no/such/dir"], "no such file: "),
]


@pytest.mark.parametrize(("argv", "fragment"), BAD)
def test_bad_input_in_process(capsys, bad_files, argv, fragment):
    rc, out, err = run(capsys, *(a.format(d=bad_files) for a in argv))
    assert rc == 2
    assert out == ""
    assert err.startswith("kvcalc: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert fragment in err


@pytest.fixture(scope="module")
def subprocess_runs(tmp_path_factory):
    """Run `python -m calc` on ten kinds of bad input (concurrently) and one good one."""
    d = tmp_path_factory.mktemp("bad")
    (d / "broken.json").write_text("{not json", encoding="utf-8")
    (d / "neg.toml").write_text('name = "x"\nnum_hidden_layers = -1\n', encoding="utf-8")
    cases = {
        "unknown preset": ["kv", "gpt-5", "--seq", "1"],
        "bad dtype": ["kv", "llama-3-70b", "--seq", "1", "--dtype", "fp12"],
        "negative seq": ["kv", "llama-3-70b", "--seq", "-1"],
        "non-integer batch": ["kv", "llama-3-70b", "--seq", "1", "--batch", "two"],
        "missing seq": ["attention", "llama-3-70b"],
        "unknown command": ["frobnicate"],
        "no command": [],
        "missing file": ["show", str(d / "missing" / "config.json")],
        "malformed config": ["kv", str(d / "broken.json"), "--seq", "1"],
        "invalid spec": ["compare", str(d / "neg.toml")],
        "good": ["kv", "llama-3-70b", "--seq", "8192", "--json"],
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KVCALC_DEBUG", None)
    procs = {
        k: subprocess.Popen(
            [sys.executable, "-m", "calc", *a],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k, a in cases.items()
    }
    return {k: (p.wait(timeout=60), p.stdout.read(), p.stderr.read()) for k, p in procs.items()}


@pytest.mark.parametrize(
    "case",
    [
        "unknown preset",
        "bad dtype",
        "negative seq",
        "non-integer batch",
        "missing seq",
        "unknown command",
        "no command",
        "missing file",
        "malformed config",
        "invalid spec",
    ],
)
def test_bad_input_subprocess(subprocess_runs, case):
    rc, out, err = subprocess_runs[case]
    assert rc == 2
    assert out == ""
    assert err.startswith("kvcalc: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


def test_good_subprocess(subprocess_runs):
    rc, out, err = subprocess_runs["good"]
    assert (rc, err) == (0, "")
    assert json.loads(out)["total_bytes"] == L3_70B_8K


def test_kv_imports_neither_torch_nor_pandas():
    code = (
        "import sys; from calc.cli import main; "
        "rc = main(['kv', 'llama-3-70b', '--seq', '8192']); "
        "print(sorted(m for m in ('torch', 'pandas', 'numpy') if m in sys.modules))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("[]")


# --- extensions ---------------------------------------------------------------------------------


@pytest.fixture
def extension(monkeypatch):
    """A module in EXTENSIONS adding `hello` (prints, or JSON) and `boom` (raises)."""
    mod = types.ModuleType("kvcalc_test_ext")

    def hello(args):
        if args.json:
            cli_output.emit_json({"hello": args.model})
        else:
            cli_output.print_table([(args.model, 1)], ("model", "n"))
        return 0

    def boom(args):
        raise ValueError("'x' must be > 0: got -1")

    def add_commands(sub):
        cli_args.add_model_arg(cli_args.add_command(sub, "hello", hello, "say hello"))
        cli_args.add_command(sub, "boom", boom, "fail")

    mod.add_commands = add_commands
    monkeypatch.setitem(sys.modules, "kvcalc_test_ext", mod)
    monkeypatch.setattr(cli_main, "EXTENSIONS", ("kvcalc_test_ext",))
    return mod


def test_extension_commands(capsys, extension):
    rc, out, _ = run(capsys, "hello", "llama-3-70b")
    assert rc == 0 and "llama-3-70b" in out
    rc, out, _ = run(capsys, "hello", "llama-3-70b", "--json")
    assert json.loads(out) == {"hello": "llama-3-70b"}
    rc, out, err = run(capsys, "boom")
    assert (rc, out, err) == (2, "", "kvcalc: error: 'x' must be > 0: got -1\n")


def test_broken_extension_spares_builtin_commands(capsys, monkeypatch):
    monkeypatch.setattr(cli_main, "EXTENSIONS", ("kvcalc_no_such_module",))
    rc, out, _ = run(capsys, "kv", "llama-3-70b", "--seq", "8192")
    assert rc == 0 and "2.68 GB" in out
    rc, out, err = run(capsys, "plan", "llama-3-70b")
    assert rc == 2 and err.count("\n") == 1 and "kvcalc_no_such_module" in err


def test_debug_env_shows_the_exception(monkeypatch):
    monkeypatch.setenv("KVCALC_DEBUG", "1")
    with pytest.raises(ValueError, match="unknown preset"):
        cli.main(["kv", "nope", "--seq", "1"])


def test_preset_names_ignore_case(capsys):
    rc, out, err = run(capsys, "kv", "Llama-3-70B", "--seq", "8192")
    assert (rc, err) == (0, "")
    assert "2,684,354,560 B" in out  # = L3_70B_8K


def test_context_beyond_the_models_own_limit_gets_a_note(capsys):
    # Llama 2 7B config.json: max_position_embeddings 4096
    rc, out, err = run(capsys, "kv", "llama-2-7b", "--seq", "8192", "--json")
    assert rc == 0 and json.loads(out)["total_bytes"] == 2 * 32 * 32 * 128 * 8192 * 2
    assert err == (
        "kvcalc: note: 8,192 tokens is beyond Llama 2 7B's context of 4,096 tokens; the "
        "figures assume it could run that long\n"
    )
    rc, out, err = run(capsys, "kv", "llama-2-7b", "--seq", "4096")
    assert (rc, err) == (0, "")


CHECKPOINTS = Path(__file__).parent / "fixtures" / "checkpoints"


@pytest.mark.parametrize("name", ["gpt-oss-20b", "meta-llama-3-8b-instruct-fp16"])
def test_show_prints_what_the_checkpoint_stores(capsys, name):
    """`kvcalc show config.json` ends with the stored bytes: for these checkpoints the index's
    metadata.total_size (fixtures: MXFP4 experts + bf16 rest; fp16 throughout)."""
    total = json.loads((CHECKPOINTS / name / "index.json").read_text())["total_size"]
    rc, out, _ = run(capsys, "show", str(CHECKPOINTS / name / "config.json"))
    assert rc == 0 and "stored weights" in out
    assert f"total  {total:,} B" in out
    rc, out, _ = run(capsys, "show", str(CHECKPOINTS / name / "config.json"), "--json")
    stored = json.loads(out)["stored_weights"]
    assert stored["total_bytes"] == total == sum(stored["breakdown_bytes"].values())
