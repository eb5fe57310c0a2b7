"""The compiler's named stages: dumps, golden snippets of codegen, GRAPHGRAD_DUMP and the CLI."""
from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import numpy as np
import pytest

import compiler as cc
import optim
from compiler.codegen import cpu, threads
from compiler.codegen.cpu import STEP_SYMBOL
from compiler.pipeline import STAGES, write_dumps
from runtime import Session

ALL_STAGES = ("graph", "optimized", "kernels", "llvm", "llvm-opt", "asm", "ptx")


def _line() -> int:
    return inspect.currentframe().f_back.f_lineno  # type: ignore[union-attr]


def _mlp_step():
    rng = np.random.default_rng(1)
    x = cc.placeholder("float32", shape=(None, 5), name="x")
    y = cc.placeholder("int32", shape=(None,), name="y")
    w1 = cc.Variable(rng.normal(size=(5, 7)).astype("float32"), name="w1")
    w2 = cc.Variable(rng.normal(size=(7, 3)).astype("float32"), name="w2")
    logits = cc.tanh(x @ w1) @ w2
    loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = optim.GradientDescentOptimizer(0.1).minimize(loss)
    feeds = {x: rng.normal(size=(6, 5)).astype("float32"), y: np.arange(6, dtype="int32") % 3}
    return [train, loss], feeds


def _exp_x_w(batch: int = 4, width: int = 3):
    x = cc.placeholder("float32", shape=(None, width), name="x")
    w = cc.Variable(np.linspace(-1, 1, width).astype("float32"), name="w")
    y = cc.exp(x * w); line = _line()  # noqa: E702
    feed = {x: np.linspace(-2, 2, batch * width, dtype="float32").reshape(batch, width)}
    return x, w, y, feed, line


def test_stage_names() -> None:
    assert tuple(STAGES) == ALL_STAGES


@pytest.mark.parametrize("stage", ALL_STAGES)
def test_every_stage_is_nonempty_text(graph, stage) -> None:
    fetches, feeds = _mlp_step()
    with Session(graph) as sess:
        exe = sess.compile(fetches, feeds)
        text = exe.dump(stage)
        assert isinstance(text, str) and text.strip()
        assert exe.dump(stage) == text  # stable when asked twice


@pytest.mark.parametrize("stage", ["LLVM", "ir", "", "optimised", "llvm_opt", None])
def test_unknown_stage_is_a_value_error(graph, stage) -> None:
    _, _, y, feed, _ = _exp_x_w()
    with Session(graph) as sess:
        exe = sess.compile(y, feed)
        with pytest.raises(ValueError, match="stage"):
            exe.dump(stage)
        # The session and the executable keep working.
        assert exe.dump("graph")
        np.testing.assert_allclose(sess.run(y, feed), np.exp(feed[next(iter(feed))] * np.linspace(-1, 1, 3)),
                                   rtol=1e-6)


def test_write_dumps_rejects_unknown_stage(graph, tmp_path) -> None:
    _, _, y, feed, _ = _exp_x_w()
    with Session(graph) as sess:
        exe = sess.compile(y, feed)
    with pytest.raises(ValueError):
        write_dumps(exe.step, str(tmp_path), ["graph", "bogus"])


def test_kernels_dump_shows_one_fused_kernel_with_user_lines(graph) -> None:
    _, _, y, feed, line = _exp_x_w()
    where = f"{__file__}:{line}"
    with Session(graph) as sess:
        exe = sess.compile(y, feed)
    text = exe.dump("kernels")
    assert len(exe.program.kernels) == 1
    headers = [ln for ln in text.splitlines() if ln.startswith("kernel ")]
    assert len(headers) == 1
    assert headers[0].startswith("kernel k0 (elementwise) space [4x3]")
    assert f"covers Exp 'Exp' ({where})" in text
    assert f"covers Mul 'Mul' ({where})" in text
    # The graph and report dumps name the same line.
    assert where in exe.dump("graph")
    report = exe.report()
    assert "1 kernel, one native call per run" in report
    assert where in report and "Exp" in report and "Mul" in report


def test_llvm_dump_has_the_entry_point_and_no_libm_calls(graph) -> None:
    _, _, y, feed, _ = _exp_x_w()
    with Session(graph) as sess:
        exe = sess.compile(y, feed)
    text = exe.dump("llvm")
    assert STEP_SYMBOL == "graphgrad_step"
    assert 'define void @"graphgrad_step"(ptr %".1")' in text
    assert text.count("define void @\"graphgrad_step\"") == 1
    callees = set(re.findall(r"\bcall\b[^@]*@\"?([\w.$]+)", text))
    assert callees, text
    # The step counts itself among the running steps (the worker pool's, see codegen/threads.py).
    counting = {threads.STEP_ENTER_SYMBOL, threads.STEP_LEAVE_SYMBOL}
    assert counting <= callees
    callees -= counting
    for callee in callees:
        # Only our kernels and LLVM intrinsics that are single instructions; no libm.
        assert re.fullmatch(r"k\d+", callee) or callee.startswith("llvm."), callee
        assert not re.match(r"llvm\.(exp|exp2|log|log2|log10|pow|sin|cos)\.", callee), callee
    declared = set(re.findall(r"declare [^@]*@\"?([\w.$]+)", text)) - counting
    assert all(name.startswith("llvm.") for name in declared), declared
    for name in ("expf", "exp", "logf", "powf", "__expf_finite"):
        assert f'@"{name}"' not in text and f"@{name}(" not in text
    for stage in ("llvm", "llvm-opt"):
        module = llvm.parse_assembly(exe.dump(stage))
        module.verify()


def test_llvm_opt_vectorises_a_large_elementwise_kernel(graph) -> None:
    _, _, y, feed, _ = _exp_x_w(batch=256, width=64)
    with Session(graph) as sess:
        exe = sess.compile(y, feed)
        got = sess.run(y, feed)
    widths = {int(n) for n in re.findall(r"<(\d+) x float>", exe.dump("llvm-opt"))}
    assert widths and max(widths) >= 4, widths
    assert "x float>" not in exe.dump("llvm")  # the vectors come from LLVM, not from us
    x_value = next(iter(feed.values()))
    np.testing.assert_allclose(got, np.exp(x_value * np.linspace(-1, 1, 64).astype("float32")), rtol=2e-6)
    asm = exe.dump("asm")
    assert not re.search(r"\bcall\w*\s+\S*(exp|log|pow)", asm)


def test_llvm_opt_vectorises_max_and_min_along_rows_and_softmax_reads_rows_in_order() -> None:
    """A max or min along a contiguous axis is a vector reduction (it was one compare and select per
    element); the sums of a softmax (x - its row's max) walk each row along its length."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (64, 1000), name="x")
        fetches = [cc.reduce_max(x, axis=1), cc.reduce_min(x), cc.argmax(x, axis=1), cc.nn.softmax(x)]
    values = np.random.default_rng(0).standard_normal((64, 1000)).astype("float32")
    values[3, 7] = np.nan
    with Session(graph) as sess:
        exe = sess.compile(fetches, {x: values})
        got = sess.run(fetches, {x: values})
    text = exe.dump("llvm-opt")
    assert re.search(r"llvm\.vector\.reduce\.fmaximum\.v\d+f32", text)
    assert re.search(r"llvm\.vector\.reduce\.fminimum\.v\d+f32", text)
    plans = [cpu.plan_kernel(kernel, 1) for kernel in exe.program.kernels]
    reduced_inside = [plan.axes[plan.order[-1]].reduced for plan, kernel in zip(plans, exe.program.kernels)
                      if kernel.reduce_axes and plan.axes]
    assert reduced_inside and all(reduced_inside), plans
    np.testing.assert_array_equal(got[0], values.max(axis=1))
    assert np.isnan(got[1])
    np.testing.assert_array_equal(got[2], values.argmax(axis=1))
    finite = np.arange(64) != 3
    shifted = np.exp(values[finite] - values[finite].max(axis=1, keepdims=True))
    np.testing.assert_allclose(got[3][finite], shifted / shifted.sum(axis=1, keepdims=True), rtol=1e-5)


def test_ptx_dump(graph) -> None:
    _, _, y, feed, _ = _exp_x_w()
    with Session(graph) as sess:
        text = sess.compile(y, feed).dump("ptx")
    assert ".entry" in text
    assert ".target sm_" in text
    assert ".address_size 64" in text
    assert "call.uni" not in text  # no libdevice / function calls


def test_the_cuda_steps_llvm_stages_are_the_gpus(graph) -> None:
    # target="cuda" runs the PTX: its llvm, llvm-opt and asm stages show the module behind it, not
    # the CPU's (checked here without a GPU, on the step the cuda target builds).
    from compiler.pipeline import compile_step, target_gpu
    x, _, y, feed, _ = _exp_x_w()
    step = target_gpu(compile_step([y], {t: v.shape for t, v in feed.items()}), "sm_90")
    assert 'target triple = "nvptx64-nvidia-cuda"' in step.dump("llvm")
    assert STEP_SYMBOL not in step.dump("llvm")
    assert "nvptx64-nvidia-cuda" in step.dump("llvm-opt") and "define" in step.dump("llvm-opt")
    assert step.dump("asm") == step.dump("ptx") and ".target sm_90" in step.dump("asm")


def test_gpu_steps_make_no_cpu_module(graph, monkeypatch) -> None:
    # A cuda-emulated step runs its own host module; the CPU's is made only when asked for.
    from compiler.codegen import cpu
    made = []
    real = cpu.build_module
    monkeypatch.setattr(cpu, "build_module", lambda *args, **kwargs: made.append(1) or real(*args, **kwargs))
    _, _, y, feed, _ = _exp_x_w()
    with Session(graph, target="cuda-emulated") as sess:
        np.testing.assert_allclose(sess.run(y, feed), np.exp(feed[next(iter(feed))] * np.linspace(-1, 1, 3)),
                                   rtol=1e-6)
    assert made == []
    with Session(graph) as sess:
        sess.run(y, feed)
    assert made == [1]


def test_graph_dump_lists_each_node_with_concrete_shapes(graph) -> None:
    _, _, y, feed, line = _exp_x_w(batch=5)
    with Session(graph) as sess:
        text = sess.compile(y, feed).dump("graph")
    assert "Placeholder() : float32[5x3]" in text
    assert "Mul(%0, %1) : float32[5x3]" in text
    assert "Exp(%2) : float32[5x3]" in text
    assert f"'Exp' {__file__}:{line}" in text


def test_graphgrad_dump_env_writes_every_stage(graph, tmp_path, monkeypatch) -> None:
    out = tmp_path / "dumps"
    monkeypatch.setenv("GRAPHGRAD_DUMP", str(out))
    monkeypatch.delenv("GRAPHGRAD_DUMP_STAGES", raising=False)
    _, _, y, feed, _ = _exp_x_w()
    z = cc.reduce_sum(y)
    with Session(graph) as sess:
        sess.run(y, feed)
        sess.run(y, feed)             # cached: no second compile
        sess.run(z, feed)             # a second step
        exe_y = sess.compile(y, feed)
    files = sorted(os.listdir(out))
    steps = sorted({name.split(".")[0] for name in files})
    assert len(steps) == 2, files
    for step in steps:
        mine = sorted(name for name in files if name.split(".")[0] == step)
        stages = sorted(name.split(".")[1] for name in mine)
        assert stages == sorted(ALL_STAGES + ("report",)), mine
        for name in mine:
            assert (out / name).read_text(encoding="utf-8").strip(), name
    first = steps[0] if (out / f"{steps[0]}.graph.txt").read_text().count("ReduceSum") == 0 else steps[1]
    assert (out / f"{first}.llvm.ll").read_text() == exe_y.dump("llvm")
    assert (out / f"{first}.ptx.ptx").read_text() == exe_y.dump("ptx")


def _write_script(tmp_path) -> str:
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import compiler as cc
        from runtime import Session

        x = cc.placeholder("float32", shape=(None, 3), name="x")
        y = cc.reduce_sum(cc.exp(x) * 2.0)
        with Session() as sess:
            for _ in range(3):
                value = sess.run(y, {x: np.zeros((4, 3), "float32")})
        print("RESULT", float(value), sys.argv[1:])
    """))
    return str(script)


def _clean_env() -> dict:
    env = dict(os.environ)
    env.pop("GRAPHGRAD_DUMP", None)
    env.pop("GRAPHGRAD_DUMP_STAGES", None)
    return env


def test_command_line_dump_writes_exactly_the_chosen_stages(tmp_path) -> None:
    script = _write_script(tmp_path)
    out = tmp_path / "cli_out"
    result = subprocess.run(
        [sys.executable, "-m", "compiler", "dump", script, "--stages", "llvm,ptx", "--out", str(out),
         "--", "--flag", "value"],
        capture_output=True, text=True, env=_clean_env(), cwd=str(tmp_path), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "RESULT 24.0 ['--flag', 'value']" in result.stdout
    files = sorted(os.listdir(out))
    assert len(files) == 3, files
    kinds = sorted(name.split(".", 1)[1] for name in files)
    assert kinds == ["llvm.ll", "ptx.ptx", "report.txt"], files
    assert len({name.split(".")[0] for name in files}) == 1  # one step, compiled once
    llvm_text = next((out / n).read_text() for n in files if n.endswith(".llvm.ll"))
    assert 'define void @"graphgrad_step"' in llvm_text
    ptx_text = next((out / n).read_text() for n in files if n.endswith(".ptx"))
    assert ".entry" in ptx_text
    assert "3 files written to" in result.stdout
    for name in files:
        assert name in result.stdout


def test_command_line_rejects_unknown_stage_and_missing_script(tmp_path) -> None:
    script = _write_script(tmp_path)
    bad_stage = subprocess.run(
        [sys.executable, "-m", "compiler", "dump", script, "--stages", "llvm,bogus",
         "--out", str(tmp_path / "o1")], capture_output=True, text=True, env=_clean_env(), timeout=120)
    assert bad_stage.returncode != 0
    assert "bogus" in bad_stage.stderr
    assert not (tmp_path / "o1").exists()
    missing = subprocess.run(
        [sys.executable, "-m", "compiler", "dump", str(tmp_path / "nope.py"), "--out", str(tmp_path / "o2")],
        capture_output=True, text=True, env=_clean_env(), timeout=120)
    assert missing.returncode != 0
    assert "nope.py" in missing.stderr


def test_command_line_dump_runs_the_script_as_python_does_and_counts_rewritten_files(tmp_path) -> None:
    """The script imports a module beside it (its directory is on sys.path, as with ``python
    SCRIPT``) though run from elsewhere; a second dump into the same directory lists the files it
    rewrote; a script that fails still gets the summary of what it compiled before."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "helper.py").write_text("SCALE = 3.0\n")
    script = folder / "train.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np, compiler as cc
        from runtime import Session
        from helper import SCALE
        x = cc.placeholder("float32", (3,), name="x")
        print("RESULT", Session().run(x * SCALE, {x: np.ones(3, "float32")}))
        if sys.argv[1:] == ["fail"]:
            raise RuntimeError("the script's own failure")
    """))
    out = tmp_path / "dumps"
    runs = [subprocess.run([sys.executable, "-m", "compiler", "dump", str(script), "--stages", "graph",
                            "--out", str(out), *extra], capture_output=True, text=True, env=_clean_env(),
                           cwd=str(tmp_path), timeout=120) for extra in ([], [], ["--", "fail"])]
    assert runs[0].returncode == 0 and runs[1].returncode == 0, runs[0].stderr + runs[1].stderr
    assert all("RESULT [3. 3. 3.]" in run.stdout for run in runs)
    for run in runs:
        assert "2 files written to" in run.stdout and "step0.graph.txt" in run.stdout, run.stdout
    assert runs[2].returncode != 0 and "the script's own failure" in runs[2].stderr


def test_graphgrad_dump_writes_what_the_gpu_target_runs(tmp_path, monkeypatch) -> None:
    """On cuda-emulated the dumped stages are the GPU's: the ptx for the Session's arch and the
    kernels with their schedule, as ``exe.dump`` gives them (they were the CPU's, for sm_80)."""
    monkeypatch.setenv("GRAPHGRAD_DUMP", str(tmp_path))
    monkeypatch.setenv("GRAPHGRAD_DUMP_STAGES", "kernels, ptx,")    # spaces and an empty name are fine
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (64, 32), name="x")
        y = cc.reduce_sum(cc.exp(x), axis=1)
    feeds = {x: np.ones((64, 32), "float32")}
    with Session(graph, target="cuda-emulated", arch="sm_90") as sess:
        sess.run(y, feeds)
        exe = sess.compile(y, feeds)
    (ptx,) = tmp_path.glob("step*.ptx.ptx")
    (kernels,) = tmp_path.glob("step*.kernels.txt")
    assert ".target sm_90" in ptx.read_text() and ptx.read_text() == exe.dump("ptx")
    assert kernels.read_text() == exe.dump("kernels")


def test_an_unknown_dump_stage_names_the_setting_and_writes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GRAPHGRAD_DUMP", str(tmp_path))
    monkeypatch.setenv("GRAPHGRAD_DUMP_STAGES", "llvm,kernel")
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (3,), name="x")
    with Session(graph) as sess, pytest.raises(ValueError, match="GRAPHGRAD_DUMP_STAGES names unknown stages 'kernel'"):
        sess.run(cc.exp(x), {x: np.ones(3, "float32")})
    assert list(tmp_path.iterdir()) == []


def test_processes_of_one_mpi_job_dump_into_a_folder_each(tmp_path, monkeypatch) -> None:
    """Every rank counts its steps from 0: in one folder they wrote over each other's files."""
    monkeypatch.setenv("GRAPHGRAD_DUMP", str(tmp_path))
    monkeypatch.setenv("GRAPHGRAD_DUMP_STAGES", "kernels")
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (3,), name="x")
        y = cc.exp(x)
    for rank in ("0", "1"):
        monkeypatch.setenv("OMPI_COMM_WORLD_RANK", rank)
        with Session(graph) as sess:
            sess.run(y, {x: np.ones(3, "float32")})
    assert sorted(p.parent.name for p in tmp_path.glob("rank*/step*.kernels.txt")) == ["rank0", "rank1"]
