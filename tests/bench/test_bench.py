"""`pld bench` on a tiny random model: JSON schema, aggregates, identity check, --check, errors."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from pld_cli.bench import corpus as bench_corpus
from pld_cli.bench import results as bench_results
from pld_cli.bench import run as bench
from pld_cli.bench import view as bench_view
from pld_cli.bench.corpus import Item, load_corpus
from pld_cli.bench.machine import describe
from pld_cli.bench.methods import MethodRun
from pld_cli.bench.results import BenchReport, ItemResult, MethodResult
from pld_cli.cli.app import main
from pld_cli.core.config import SamplingConfig
from pld_cli.errors import PldError
from pld_cli.loading.gguf import default_gguf
from pld_cli.runtime.clib import library
from pld_cli.tasks.prompts import Task

METHOD_KEYS = {
    "prompt_tokens",
    "new_tokens",
    "delivered_tokens",
    "passes",
    "tokens_per_pass",
    "drafted_tokens",
    "accepted_tokens",
    "decode_s",
    "tokens_per_s",
    "copy_rate",
    "mean_accepted",
    "predicted_speedup",
    "speedup_vs_greedy",
    "identical_to_greedy",
    "first_divergence",
}

needs_kernel = pytest.mark.skipif(
    library.kernel("decode_rows") is None, reason=f"no C kernel: {library.unavailable()}"
)


def pld(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run `pld ARGV` in-process: (exit code, stdout, stderr)."""
    saved = sys.argv
    sys.argv = ["pld", *argv]
    try:
        with pytest.raises(SystemExit) as exit_info:
            main()
    finally:
        sys.argv = saved
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def write_corpus(folder, entries: list[dict], files: dict[str, str]):
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(entry) for entry in entries]
    (folder / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(
        tmp_path / "mini",
        [
            {"id": "e1", "task": "edit", "file": "a.py", "instruction": "Rename f to g."},
            {"id": "s1", "task": "summarize", "file": "notes.txt"},
        ],
        {
            "a.py": "def f(x):\n    return x + 1\n\n\nprint(f(1), f(2))\n",
            "notes.txt": "The team met on Monday. The release moves to Friday. Tests pass.\n",
        },
    )


def bench_argv(tiny_model_dir, corpus, tokens: int, *extra: str) -> list[str]:
    """`pld bench` on the corpus with the tiny model on the CPU, quiet."""
    common = ["-m", tiny_model_dir, "--device", "cpu", "--max-new-tokens", str(tokens), "-q"]
    return ["bench", str(corpus), *common, *extra]


def bench_json(tiny_model_dir, corpus, capsys, *extra) -> tuple[int, dict | None, str]:
    out = corpus.parent / "bench.json"
    code, stdout, err = pld(bench_argv(tiny_model_dir, corpus, 12, "-o", str(out), *extra), capsys)
    assert stdout == ""
    return code, json.loads(out.read_text()) if out.exists() else None, err


def test_bench_json_schema_and_aggregates(tiny_model_dir, corpus, capsys):
    code, data, err = bench_json(tiny_model_dir, corpus, capsys, "--check", "--repeat", "2")
    assert (code, err) == (0, "")
    assert set(data) == {
        "model",
        "device",
        "machine",
        "dtype",
        "weights",
        "repeat",
        "max_new_tokens",
        "sampling",
        "wall_s",
        "runtimes",
        "items",
        "summary",
        "summary_loop_free",
        "documents",
        "throughput",
        "prefill",
    }
    assert data["documents"] == {}  # no item was too long for one call
    assert data["machine"] == describe("cpu")
    assert data["throughput"] == [] and data["prefill"] is None  # measured with --concurrency
    assert (data["device"], data["dtype"], data["repeat"], data["max_new_tokens"]) == (
        "cpu",
        "float32",
        2,
        12,
    )
    assert [(i["id"], i["corpus"], i["task"]) for i in data["items"]] == [
        ("e1", "mini", "edit"),
        ("s1", "mini", "summarize"),
    ]
    for item in data["items"]:
        methods = item["methods"]
        assert list(methods) == ["hf-greedy", "greedy", "pld", "hf-pld"]
        assert all(set(record) >= METHOD_KEYS for record in methods.values())
        detail = methods["pld"]["passes_detail"]
        assert len(detail) == methods["pld"]["passes"]
        assert {"verified", "offered", "accepted", "why"} == set(detail[0])
        histogram = methods["pld"]["acceptance_histogram"]
        assert all(0 <= h["rate"] <= 1 for h in histogram)
        greedy, hf = methods["greedy"], methods["hf-pld"]
        assert greedy["passes"] == greedy["new_tokens"] and greedy["accepted_tokens"] == 0
        assert greedy["speedup_vs_greedy"] == 1.0 and greedy["identical_to_greedy"] is True
        assert methods["pld"]["identical_to_greedy"] is True  # float32: exact
        assert methods["pld"]["first_divergence"] is None
        # hf-pld: accepted derived from counts; drafts and accepting passes are not observable.
        assert hf["drafted_tokens"] is None and hf["mean_accepted"] is None
        assert hf["predicted_speedup"] is None
        assert hf["accepted_tokens"] == max(hf["new_tokens"] - hf["passes"], 0)
        assert 0 < greedy["new_tokens"] <= 12
    summary = data["summary"]["mini"]
    for method, agg in summary.items():
        records = [item["methods"][method] for item in data["items"]]
        tokens = sum(r["new_tokens"] for r in records)
        seconds = sum(r["decode_s"] for r in records)
        assert agg["tokens_per_s"] == pytest.approx(tokens / seconds, rel=1e-3)
        assert agg["items"] == 2
        assert agg["identical_items"] == sum(r["identical_to_greedy"] for r in records)
        ratio = agg["tokens_per_s"] / summary["greedy"]["tokens_per_s"]
        assert agg["speedup_vs_greedy"] == pytest.approx(ratio, rel=1e-2)


def altered(runner):
    """A runner whose output differs from greedy's at token 3."""

    def run(loaded, ids, config):
        result = runner(loaded, ids, config)
        tokens = list(result.token_ids)
        tokens[3] = tokens[3] + 1
        return dataclasses.replace(result, token_ids=tokens)

    return run


def test_identity_check_flags_divergence_and_check_fails(
    tiny_model_dir, corpus, capsys, monkeypatch
):
    monkeypatch.setitem(bench.RUNNERS, "pld", altered(bench.RUNNERS["pld"]))
    monkeypatch.setitem(bench.RUNNERS, "odd", altered(bench.RUNNERS["greedy"]))
    code, data, err = bench_json(
        tiny_model_dir, corpus, capsys, "--methods", "greedy,pld,odd", "--check"
    )
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("pld: error: --check:")
    for item in data["items"]:
        for method in ("pld", "odd"):
            assert item["methods"][method]["identical_to_greedy"] is False
            assert item["methods"][method]["first_divergence"] == 3
    assert data["summary"]["mini"]["pld"]["identical_items"] == 0
    assert data["summary"]["mini"]["greedy"]["identical_items"] == 2


def test_table_on_stdout_without_json(tiny_model_dir, corpus, capsys):
    code, out, err = pld(bench_argv(tiny_model_dir, corpus, 4, "--methods", "pld,hf-pld"), capsys)
    assert (code, err) == (0, "")
    assert "mini/e1" in out and "hf-pld" in out
    assert f"machine: {describe('cpu')}" in out


def test_missing_manifest(tmp_path, capsys):
    code, out, err = pld(["bench", str(tmp_path)], capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "no manifest.jsonl" in err


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not valid JSON"),
        ('{"task": "edit", "file": "a.py"}', 'missing or empty "id"'),
        (
            '{"id": "x", "task": "translate", "file": "a.py"}',
            r"unknown task \"translate\": expected .edit. or .summarize.",
        ),
        ('{"id": "x", "task": "edit", "file": "a.py"}', 'needs an "instruction"'),
        ('{"id": "x", "task": "summarize", "file": "gone.txt"}', "no such file"),
    ],
)
def test_bad_manifest(tmp_path, line, message):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "manifest.jsonl").write_text(line + "\n")
    with pytest.raises(PldError, match=message):
        load_corpus(tmp_path)


def test_corpora_sharing_a_name_are_told_apart(tmp_path):
    files = {"n.txt": "Some notes.\n"}
    entry = {"id": "n", "task": "summarize", "file": "n.txt"}
    folders = [write_corpus(tmp_path / p / "edit", [entry], files) for p in ("a", "b")]
    items = bench_corpus.load_corpora(folders)
    assert [(i.corpus, i.id, i.task.name) for i in items] == [
        ("a/edit", "n", "n.txt"),
        ("b/edit", "n", "n.txt"),
    ]


def test_unknown_method_and_check_without_greedy(corpus, capsys):
    code, _, err = pld(["bench", str(corpus), "--methods", "greedy,beam"], capsys)
    assert code == 2 and "unknown method beam" in err
    code, _, err = pld(["bench", str(corpus), "--methods", "pld", "--check"], capsys)
    assert code == 2 and "--check needs" in err


def test_plot_without_matplotlib_fails_before_loading(corpus, capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["bench", str(corpus), "-m", str(tmp_path / "no-model"), "--plot", "x.png"]
    code, _, err = pld(argv, capsys)
    assert code == 1
    assert err == "pld: error: --plot needs matplotlib: pip install 'pld-cli[plot]'\n"


def synthetic_report() -> BenchReport:
    """Two items, greedy and pld, with known counts and times."""

    def result(tokens, passes, accepted, accepting, seconds):
        run = MethodRun(tokens, 10, passes, 2 * accepted, accepted, accepting, seconds)
        return MethodResult(run, seconds)

    items = []
    for n, (tokens, seconds) in enumerate([([5, 6, 7, 8], 0.4), ([5, 6, 9, 9, 9, 9], 0.3)]):
        runs = {
            "greedy": [result(tokens, len(tokens), 0, 0, seconds).run],
            "pld": [result(tokens, 2, len(tokens) - 2, 2, seconds / 2).run],
        }
        items.append(ItemResult(Item(f"i{n}", "c", Task("summarize", "d")), bench.compare(runs)))
    return BenchReport("m", "cpu", "float32", "float32", 1, 16, SamplingConfig(), items, 1.0)


def test_summary_aggregates_synthetic():
    summary = synthetic_report().summary()["c"]
    assert summary["greedy"]["tokens_per_s"] == pytest.approx(10 / 0.7, abs=0.01)
    assert summary["pld"]["tokens_per_s"] == pytest.approx(10 / 0.35, abs=0.01)
    assert summary["pld"]["speedup_vs_greedy"] == pytest.approx(2.0)
    assert summary["pld"]["identical_items"] == 2
    assert bench_results.pooled_mean_accepted(synthetic_report(), "c") == pytest.approx(6 / 4)


def test_a_looping_item_is_left_out_of_the_loop_free_summary():
    report = synthetic_report()
    loop = list(range(30)) * 3  # a passage and two verbatim repeats
    runs = {
        "greedy": [MethodRun(loop, 10, 90, 0, 0, 0, 0.9)],
        "pld": [MethodRun(loop, 10, 5, 90, 85, 5, 0.1)],
    }
    report.items.append(ItemResult(Item("loop", "c", Task("summarize", "d")), bench.compare(runs)))
    looped = report.items[-1].methods["pld"]
    assert looped.loop_share == pytest.approx(60 / 90) and looped.as_dict()["loop_share"] == 0.6667
    assert report.summary()["c"]["pld"]["items"] == 3
    free = report.summary(loop_free=True)["c"]["pld"]
    assert free["items"] == 2 and free["speedup_vs_greedy"] == pytest.approx(2.0)
    assert report.summary()["c"]["pld"]["speedup_vs_greedy"] > 3  # the loop passes for a copy
    assert report.as_json()["summary_loop_free"]["c"]["pld"] == free


def test_first_divergence():
    assert bench_results.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert bench_results.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert bench_results.first_divergence([1, 2], [1, 2, 3]) == 2


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "speedup.png"
    bench_view.plot(synthetic_report(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_methods_on_another_runtime_run_side_by_side(tiny_model_dir, corpus, capsys):
    methods = "greedy,pld,greedy@dynamic,pld@dynamic"
    code, data, err = bench_json(tiny_model_dir, corpus, capsys, "--methods", methods, "--check")
    assert (code, err) == (0, "")
    assert data["runtimes"] == {
        "greedy": "native",
        "pld": "native",
        "greedy@dynamic": "dynamic",
        "pld@dynamic": "dynamic",
    }
    for item in data["items"]:
        assert all(m["identical_to_greedy"] for m in item["methods"].values())
    code, _, err = pld(["bench", str(corpus), "--methods", "greedy,hf-pld@static"], capsys)
    assert code == 2 and "unknown method hf-pld@static" in err


def test_transformers_passes_are_counted_like_pld_passes(tiny_model_dir, corpus, capsys):
    code, data, _ = bench_json(tiny_model_dir, corpus, capsys, "--methods", "greedy,hf-greedy")
    assert code == 0
    for item in data["items"]:
        hf, greedy = item["methods"]["hf-greedy"], item["methods"]["greedy"]
        assert hf["passes"] == hf["new_tokens"] == greedy["passes"]  # one pass per token
        assert hf["accepted_tokens"] == 0


def test_a_long_document_is_reported_per_chunk_and_in_total(tiny_model_dir, tmp_path, capsys):
    long_text = "".join(
        f"## Part {n}\n\n" + "Revenue rose and costs fell. " * 30 + "\n\n" for n in range(4)
    )
    folder = write_corpus(
        tmp_path / "long", [{"id": "big", "task": "summarize", "file": "b.md"}], {"b.md": long_text}
    )
    code, data, _ = bench_json(
        tiny_model_dir, folder, capsys, "--methods", "greedy,pld", "--chunk-tokens", "250"
    )
    assert code == 0
    ids = [item["id"] for item in data["items"]]
    assert len(ids) >= 2 and ids[0] == "big#1"
    assert {item["part_of"] for item in data["items"]} == {"big"}
    total = data["documents"]["long/big"]["pld"]
    assert total["parts"] == len(ids) and total["identical_parts"] == len(ids)
    assert total["new_tokens"] == sum(i["methods"]["pld"]["new_tokens"] for i in data["items"])
    code, out, _ = pld(
        [
            "bench",
            str(folder),
            "-m",
            tiny_model_dir,
            "--max-new-tokens",
            "4",
            "--methods",
            "greedy,pld",
            "--chunk-tokens",
            "250",
        ],
        capsys,
    )
    assert code == 0 and "long documents, all parts" in out


def test_a_server_is_one_more_method_and_its_throughput_is_measured(tiny_model_dir, corpus, capsys):
    from fake_server import Answer, FakeServer

    server = FakeServer(tiny_model_dir, lambda body: Answer(metrics=None))
    try:
        code, data, err = bench_json(
            tiny_model_dir,
            corpus,
            capsys,
            "--methods",
            "pld",
            "--server",
            server.url,
            "--concurrency",
            "2",
        )
    finally:
        server.close()
    assert (code, err) == (0, "")
    for item in data["items"]:
        assert set(item["methods"]) == {"pld", "server"}
        on_server = item["methods"]["server"]
        assert (on_server["new_tokens"], on_server["passes"]) == (5, 3)  # [1], [2, 3, 4], [5]
        assert on_server["drafted_tokens"] is None  # the server did not say
    local, remote = data["throughput"]  # float weights: pld -j 1 only
    assert (local["method"], local["concurrency"], remote["method"], remote["concurrency"]) == (
        "pld",
        1,
        "server",
        2,
    )
    assert local["documents"] == remote["documents"] == 2 and remote["new_tokens"] == 10
    assert local["identical_to_first"] is None and remote["identical_to_first"] in (0, 1, 2)
    # warm-up (pld, server), 2 items of each, and the server's 2 documents in flight
    assert len(server.requests) == 1 + 2 + 2


@needs_kernel
def test_concurrency_measures_pld_one_at_a_time_and_several_at_once(tiny_model_dir, corpus, capsys):
    code, data, err = bench_json(
        tiny_model_dir,
        corpus,
        capsys,
        "--methods",
        "pld",
        "--quantize",
        "int8",
        "--concurrency",
        "2",
    )
    assert (code, err) == (0, "")
    alone, together = data["throughput"]
    assert (alone["concurrency"], together["concurrency"]) == (1, 2)
    assert together["identical_to_first"] == together["documents"] == 2
    prefill = data["prefill"]
    assert prefill["tokens_per_s"] > 0 and 0 < prefill["fraction_of_kernel"] < 1


@pytest.mark.parametrize(
    "methods,weights",
    [
        ("hf-greedy,greedy,pld", "float32 from a Q4_1 GGUF"),
        ("greedy,pld", "the Q4_1 GGUF's own blocks"),
    ],
)
def test_a_gguf_runs_float_only_where_transformers_methods_are_benched(
    corpus, capsys, methods, weights
):
    # auto runs a GGUF's own blocks, but transformers' generate() needs float weights, so with
    # hf- methods every method runs float.
    gguf = str(default_gguf())
    code, data, err = bench_json(gguf, corpus, capsys, "--methods", methods)
    assert code == 0, err
    assert data["weights"] == weights
