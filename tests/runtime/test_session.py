"""``Session``: one native call per step, fetch structures, variables, the executable cache, targets."""
from __future__ import annotations

import collections
from typing import Any, Callable

import numpy as np
import pytest

import compiler as cc
import optim
import runtime.jit
from runtime import Executable, Session


def _mlp(dtype: str = "float32", seed: int = 0, batch: int = 16):
    """An MLP classifier and its GradientDescent training step; returns (train, loss, feeds, vars)."""
    rng = np.random.default_rng(seed)
    x = cc.placeholder(dtype, shape=(None, 6), name="x")
    y = cc.placeholder("int32", shape=(None,), name="y")
    w1 = cc.Variable((rng.normal(size=(6, 8)) * 0.5).astype(dtype), name="w1")
    b1 = cc.Variable(np.zeros(8, dtype), name="b1")
    w2 = cc.Variable((rng.normal(size=(8, 3)) * 0.5).astype(dtype), name="w2")
    b2 = cc.Variable(np.zeros(3, dtype), name="b2")
    hidden = cc.nn.relu(x @ w1 + b1)
    logits = hidden @ w2 + b2
    loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = optim.GradientDescentOptimizer(0.5).minimize(loss)
    feeds = {x: rng.normal(size=(batch, 6)).astype(dtype), y: rng.integers(0, 3, batch).astype("int32")}
    return train, loss, feeds, [w1, b1, w2, b2]


# -- one native call per step -----------------------------------------------------------------------

def test_training_step_is_one_native_call(graph, monkeypatch) -> None:
    calls = []
    original = runtime.jit.NativeStep.__call__

    def counting(self, table):
        calls.append(self)
        return original(self, table)

    monkeypatch.setattr(runtime.jit.NativeStep, "__call__", counting)
    train, loss, feeds, _ = _mlp()
    with Session(graph) as sess:
        exe = sess.compile([train, loss], feeds)
        assert isinstance(exe, Executable)
        assert len(exe.program.kernels) > 1
        assert exe.native_calls == 0 and calls == []
        losses = []
        for run in range(1, 4):
            _, value = sess.run([train, loss], feeds)
            losses.append(float(value))
            assert len(calls) == run          # exactly one native call per Session.run
            assert exe.native_calls == run
        assert len(set(map(id, calls))) == 1  # always the same compiled step
        assert sess.compile([train, loss], feeds) is exe
    assert losses[2] < losses[0]


def test_each_run_makes_one_native_call_across_fetch_sets(graph, monkeypatch) -> None:
    calls = []
    original = runtime.jit.NativeStep.__call__
    monkeypatch.setattr(runtime.jit.NativeStep, "__call__",
                        lambda self, table: (calls.append(self), original(self, table))[1])
    train, loss, feeds, _ = _mlp()
    with Session(graph) as sess:
        sess.run(loss, feeds)
        sess.run(train, feeds)
        sess.run([train, loss], feeds)
        sess.run({"l": loss}, feeds)
    assert len(calls) == 4
    assert len(set(map(id, calls))) == 3  # loss alone and {"l": loss} share one step


# -- fetch structures ---------------------------------------------------------------------------------

Pair = collections.namedtuple("Pair", "first second")


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_fetch_structures(graph, target) -> None:
    x = cc.placeholder("float64", shape=(None,), name="x")
    a = x * 2.0
    b = cc.reduce_sum(x)
    op = cc.no_op()
    v = cc.Variable(np.array([1.0, 2.0]), name="v")
    inc = cc.group(v.assign_add(np.ones(2)))
    xv = np.array([1.0, 2.0, 3.0])
    with Session(graph, target=target) as sess:
        single = sess.run(a, {x: xv})
        assert isinstance(single, np.ndarray)
        np.testing.assert_array_equal(single, 2 * xv)
        scalar = sess.run(b, {x: xv})
        assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar == 6.0
        assert sess.run(op) is None
        assert sess.run(inc) is None
        got = sess.run([a, (b, op), {"s": b, "nested": [a, {"deep": (op,)}]}, Pair(b, [a])], {x: xv})
    assert isinstance(got, list) and len(got) == 4
    np.testing.assert_array_equal(got[0], 2 * xv)
    assert isinstance(got[1], tuple) and got[1][0] == 6.0 and got[1][1] is None
    assert isinstance(got[2], dict) and list(got[2]) == ["s", "nested"]
    assert got[2]["s"] == 6.0
    np.testing.assert_array_equal(got[2]["nested"][0], 2 * xv)
    assert got[2]["nested"][1] == {"deep": (None,)}
    assert isinstance(got[3], Pair) and got[3].first == 6.0
    assert isinstance(got[3].second, list)
    np.testing.assert_array_equal(got[3].second[0], 2 * xv)


def test_fetch_same_tensor_twice_and_empty_structures(graph) -> None:
    x = cc.placeholder("float32", shape=(2,), name="x")
    y = x + 1.0
    xv = np.array([1.0, 2.0], "float32")
    with Session(graph) as sess:
        first, second = sess.run([y, y], {x: xv})
        np.testing.assert_array_equal(first, [2.0, 3.0])
        np.testing.assert_array_equal(second, [2.0, 3.0])
        assert sess.run([], {}) == []
        assert sess.run({}) == {}


def test_fetched_arrays_are_not_overwritten_by_later_runs(graph) -> None:
    x = cc.placeholder("float32", shape=(3,), name="x")
    y = cc.exp(x) * 2.0
    with Session(graph) as sess:
        first = sess.run(y, {x: np.zeros(3, "float32")})
        sess.run(y, {x: np.ones(3, "float32")})
    np.testing.assert_array_equal(first, [2.0, 2.0, 2.0])


def test_fed_arrays_are_not_modified(graph) -> None:
    train, loss, feeds, _ = _mlp()
    saved = {k: v.copy() for k, v in feeds.items()}
    with Session(graph) as sess:
        for _ in range(2):
            sess.run([train, loss], feeds)
    for key, value in feeds.items():
        np.testing.assert_array_equal(value, saved[key])


def test_fetching_a_placeholder_returns_its_feed(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 2), name="x")
    xv = np.arange(6, dtype="float32").reshape(3, 2)
    with Session(graph) as sess:
        got = sess.run(x, {x: xv})
        np.testing.assert_array_equal(got, xv)
        non_contiguous = np.asfortranarray(np.arange(6, dtype="float32").reshape(3, 2) * 10)
        np.testing.assert_array_equal(sess.run(x * 1.0, {x: non_contiguous}), non_contiguous)
        np.testing.assert_array_equal(sess.run(x * 1.0, {x: xv}), xv)


def test_feed_by_name(graph) -> None:
    x = cc.placeholder("float32", shape=(2,), name="x")
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(x * 2.0, {"x:0": np.ones(2, "float32")}), [2.0, 2.0])
        np.testing.assert_array_equal(sess.run(x * 2.0, {"x": np.ones(2, "float32")}), [2.0, 2.0])


def test_unfetchable_things_raise_type_error(graph) -> None:
    with Session(graph) as sess:
        with pytest.raises(TypeError, match="cannot fetch 3.5"):
            sess.run(3.5)
        with pytest.raises(TypeError):
            sess.run([np.ones(2)])
        # An unconnected gradient is None: the message says why and what gives zeros instead.
        v, w = cc.Variable(1.0, name="v"), cc.Variable(2.0, name="w")
        with pytest.raises(TypeError, match=r"cannot fetch None: .*gradients\(\) gives None .*"
                                            r"unconnected_gradients='zero'"):
            sess.run(cc.gradients(v * 3.0, [w]))


# -- variables --------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_variables_persist_across_runs_and_fetch_sets(graph, target) -> None:
    v = cc.Variable(np.array([1.0, 2.0]), name="v")
    inc = v.assign_add(np.array([10.0, 10.0]))
    double = v.assign(v * 2.0)
    read = v * 1.0
    with Session(graph, target=target) as sess:
        np.testing.assert_array_equal(sess.run(read), [1.0, 2.0])   # lazily initialised
        np.testing.assert_array_equal(sess.run(inc), [11.0, 12.0])
        np.testing.assert_array_equal(sess.run(read), [11.0, 12.0])
        np.testing.assert_array_equal(sess.run(double), [22.0, 24.0])
        np.testing.assert_array_equal(sess.run(inc), [32.0, 34.0])
        np.testing.assert_array_equal(sess.run([v, read])[0], [32.0, 34.0])
        # Reads inside one step see the value from the start of the step.
        old, new = sess.run([read, inc])
        np.testing.assert_array_equal(old, [32.0, 34.0])
        np.testing.assert_array_equal(new, [42.0, 44.0])
    np.testing.assert_array_equal(v.initial_value, [1.0, 2.0])


def test_training_changes_variables_across_fetch_sets(graph) -> None:
    train, loss, feeds, variables = _mlp()
    with Session(graph) as sess:
        before = sess.run(variables)
        sess.run(train, feeds)
        after_train = sess.run(variables)
        sess.run([train, loss], feeds)
        after_both = sess.run(variables)
    assert any(not np.array_equal(b, a) for b, a in zip(before, after_train))
    assert any(not np.array_equal(a1, a2) for a1, a2 in zip(after_train, after_both))
    for b, v in zip(before, variables):
        np.testing.assert_array_equal(b, v.initial_value)


def test_two_sessions_have_independent_variables(graph) -> None:
    v = cc.Variable(np.zeros(3, "float32"), name="v")
    inc = v.assign_add(np.ones(3, "float32"))
    first, second = Session(graph), Session(graph)
    try:
        for _ in range(3):
            first.run(inc)
        second.run(inc)
        np.testing.assert_array_equal(first.run(v), [3.0, 3.0, 3.0])
        np.testing.assert_array_equal(second.run(v), [1.0, 1.0, 1.0])
    finally:
        first.close()
        second.close()
    with Session(graph) as third:
        np.testing.assert_array_equal(third.run(v), [0.0, 0.0, 0.0])


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_global_variables_initializer_resets(graph, target) -> None:
    train, loss, feeds, variables = _mlp()
    counter = cc.Variable(np.array(5, "int32"), name="counter", trainable=False)
    bump = counter.assign_add(np.array(1, "int32"))
    init = cc.global_variables_initializer()
    with Session(graph, target=target) as sess:
        assert sess.run(init) is None                       # before any use: harmless
        initial_loss = sess.run(loss, feeds)
        for _ in range(3):
            sess.run([train, bump], feeds)
        assert sess.run(counter) == 8
        trained_loss = sess.run(loss, feeds)
        assert trained_loss < initial_loss
        sess.run(init)
        assert sess.run(counter) == 5
        for value, variable in zip(sess.run(variables), variables):
            np.testing.assert_array_equal(value, variable.initial_value)
        np.testing.assert_allclose(sess.run(loss, feeds), initial_loss, rtol=1e-6)
        # The same compiled step keeps training from the reset values.
        sess.run([train, bump], feeds)
        assert sess.run(counter) == 6


def test_variables_initialised_lazily_from_initial_values(graph) -> None:
    a = cc.Variable(np.arange(3.0), name="a")
    b = cc.Variable(7, name="b", trainable=False)
    c = cc.Variable(np.ones((2, 2), "float32"), name="c")
    with Session(graph) as sess:
        got_b = sess.run(b * 1)
        assert got_b == 7 and got_b.dtype == b.dtype
        np.testing.assert_array_equal(sess.run(a + 1.0), [1.0, 2.0, 3.0])
        assert sess.run(c).dtype == np.float32
        np.testing.assert_array_equal(sess.run(c), np.ones((2, 2)))


# -- the executable cache ---------------------------------------------------------------------------

def test_executables_are_cached_per_fetch_set_and_feed_shape(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 3), name="x")
    w = cc.Variable(np.ones((3, 2), "float32"), name="w")
    y = x @ w
    s = cc.reduce_sum(y)
    feed4 = {x: np.ones((4, 3), "float32")}
    feed4b = {x: np.full((4, 3), 2.0, "float32")}
    feed9 = {x: np.ones((9, 3), "float32")}
    with Session(graph) as sess:
        exe = sess.compile(y, feed4)
        assert sess.compile(y, feed4) is exe
        assert sess.compile(y, feed4b) is exe       # same shapes, different values
        assert sess.compile([y], feed4) is exe      # same fetch set
        exe9 = sess.compile(y, feed9)
        assert exe9 is not exe
        assert sess.compile(y, feed9) is exe9
        assert sess.compile(s, feed4) is not exe    # another fetch set
        assert sess.compile([y, s], feed4) is not exe
        # None dims take the fed size.
        assert sess.run(y, feed9).shape == (9, 2)
        assert sess.run(y, feed4).shape == (4, 2)
        assert sess.run(y, {x: np.ones((1, 3), "float32")}).shape == (1, 2)
        assert sess.run(y, {x: np.ones((0, 3), "float32")}).shape == (0, 2)
        assert "float32[9x3]" in exe9.dump("graph")
        # run() uses the cached step: its native call count moves.
        before = exe9.native_calls
        sess.run(y, feed9)
        assert exe9.native_calls == before + 1


def test_compile_needs_the_cpu_target(graph) -> None:
    x = cc.placeholder("float32", shape=(2,), name="x")
    with Session(graph, target="reference") as sess:
        with pytest.raises(ValueError):
            sess.compile(x * 2.0, {x: np.ones(2, "float32")})


# -- targets ----------------------------------------------------------------------------------------

def test_reference_and_cpu_agree_on_mlp_training(graph) -> None:
    train, loss, feeds, variables = _mlp(dtype="float64", batch=12)
    results = {}
    for target in ("reference", "cpu"):
        with Session(graph, target=target) as sess:
            losses = [sess.run([train, loss], feeds)[1] for _ in range(3)]
            results[target] = (losses, sess.run(variables))
    ref_losses, ref_vars = results["reference"]
    cpu_losses, cpu_vars = results["cpu"]
    np.testing.assert_allclose(cpu_losses, ref_losses, rtol=1e-12)
    for c, r in zip(cpu_vars, ref_vars):
        assert c.dtype == np.float64
        np.testing.assert_allclose(c, r, rtol=1e-12, atol=1e-14)
    assert ref_losses[2] < ref_losses[0]
    assert any(not np.array_equal(v, var.initial_value) for v, var in zip(cpu_vars, variables))


def test_unknown_target_raises(graph) -> None:
    with pytest.raises(ValueError, match="target"):
        Session(graph, target="gpu")
    with pytest.raises(ValueError):
        Session(graph, target="CPU")


def test_closed_session_raises(graph) -> None:
    x = cc.placeholder("float32", shape=(2,), name="x")
    y = x * 2.0
    sess = Session(graph)
    np.testing.assert_array_equal(sess.run(y, {x: np.ones(2, "float32")}), [2.0, 2.0])
    compiled = sess.compile(y, {x: np.ones(2, "float32")})
    sess.close()
    with pytest.raises(RuntimeError, match="closed"):
        sess.run(y, {x: np.ones(2, "float32")})
    with pytest.raises(RuntimeError, match="this step's Session is closed"):   # it ran on released variables
        compiled.run({x: np.ones(2, "float32")})
    with pytest.raises(RuntimeError, match="closed"):
        sess.compile(y, {x: np.ones(2, "float32")})
    with Session(graph) as ctx:
        pass
    with pytest.raises(RuntimeError):
        ctx.run(y, {x: np.ones(2, "float32")})



def test_a_repeated_run_skips_the_checks_only_while_its_feeds_match(graph, monkeypatch) -> None:
    """The loop of a training script (the same fetches, the same feed keys, arrays of the same
    shapes and dtypes) runs its compiled step straight away; any other feed goes through the
    full checks, with their errors and conversions, and gets the result a first run would."""
    train, loss, feeds, variables = _mlp(batch=4)
    x, y = feeds
    prepared = []
    original = Session._prepare

    def counting(self, fetches, feed_dict):
        prepared.append(self)
        return original(self, fetches, feed_dict)

    monkeypatch.setattr(Session, "_prepare", counting)
    with Session(graph) as sess, Session(graph) as fresh:
        fetches = [loss, train]
        for step in range(3):
            value, none = sess.run(fetches, feeds)
            assert none is None and np.isfinite(value)
            assert fresh.run(fetches, feeds)[0] == value      # both sessions took the same steps
        assert len(prepared) == 2                              # one full run per session, then repeats
        assert isinstance(sess.run(tuple(fetches), feeds), tuple) and fresh.run(tuple(fetches), feeds)
        assert isinstance(sess.run(loss, feeds), np.ndarray)
        prepared.clear()
        # other feeds than the repeated ones: each takes the full path, once
        as_float64 = {x: feeds[x].astype("float64") + 1e-12, y: feeds[y]}   # rounded to float32, as TF1
        assert sess.run(loss, as_float64) == fresh.run(loss, feeds)
        with pytest.raises(cc.FeedError, match="without losing"):
            sess.run(loss, {x: feeds[x].astype("float64") * 1e300, y: feeds[y]})   # beyond float32's range
        as_list = {x: feeds[x].tolist(), y: feeds[y]}
        np.testing.assert_allclose(sess.run(loss, as_list), fresh.run(loss, feeds), rtol=1e-6)
        longer = {x: np.concatenate([feeds[x], feeds[x]]), y: np.concatenate([feeds[y], feeds[y]])}
        np.testing.assert_allclose(sess.run(loss, longer), fresh.run(loss, longer), rtol=1e-6)
        with pytest.raises(cc.FeedError, match="does not match"):
            sess.run(loss, {x: feeds[x][:, :5], y: feeds[y]})
        with pytest.raises(cc.FeedError, match="you must feed"):
            sess.run(loss, {x: feeds[x]})
        assert prepared.count(sess) == 6
        fetches.append(variables[0])                           # the same list, one more fetch
        assert len(sess.run(fetches, feeds)) == 3
        # out= on a repeated run: written into, returned, refused when it is not an array
        prepared.clear()
        target = np.empty((), "float32")
        for _ in range(2):
            assert sess.run(loss, feeds, out=target) is target and target == sess.run(loss, feeds)
            assert sess.run([loss, train], feeds, out=[target, None])[0] is target
        assert prepared.count(sess) == 1     # the first: `longer` above has taken the key's place since
        with pytest.raises(ValueError, match="writeable array of shape"):
            sess.run(loss, feeds, out=np.empty(3, "float32"))
        with pytest.raises(ValueError, match="same structure"):
            sess.run([loss, train], feeds, out=[target])
    with pytest.raises(RuntimeError, match="closed"):
        sess.run(loss, feeds)


def test_repeated_runs_of_nested_fetches_and_names_keep_their_structure_and_values(graph) -> None:
    """The repeated-run path keyed a fetch list by the ids of its items: a nested list (or a name
    string) made afresh each call is not kept alive, so its id came back as another one's, and a
    hit returned the flat values of the other fetches (a training loop's ``_, (l, m) = run([train,
    [loss, mae]])`` failed to unpack at step 12)."""
    x = cc.placeholder("float32", (2,), name="x")
    a = cc.identity(x + 1.0, name="a")
    b = cc.identity(x + 100.0, name="b")
    feeds = {x: np.ones(2, "float32")}
    with Session(graph) as sess:
        for _ in range(50):
            first, (second,) = sess.run([a, [b]], feeds)
            assert first[0] == 2.0 and second[0] == 101.0
            assert sess.run([[b]], feeds)[0][0][0] == 101.0
            assert sess.run([[a], [b]], feeds)[1][0][0] == 101.0
            assert sess.run(["".join(["b", ":0"])], feeds)[0][0] == 101.0
            assert sess.run([{"a": a}, b], feeds)[0]["a"][0] == 2.0
        inner = [a]
        fetches = [inner]
        assert sess.run(fetches, feeds)[0][0][0] == 2.0
        inner[0] = b                                           # the same lists, another tensor inside
        assert sess.run(fetches, feeds)[0][0][0] == 101.0


def test_the_variable_lock_lets_readers_share_and_writers_wait_their_turn() -> None:
    """Readers run together; a writer runs alone, and a writer waiting keeps new readers out."""
    import threading
    import time

    from runtime.executable import ReadWriteLock
    lock = ReadWriteLock()
    order: list[str] = []
    lock.acquire(False)
    lock.acquire(False)                                        # two readers at once

    def writer() -> None:
        lock.acquire(True)
        order.append("writer")
        lock.release(True)

    def reader() -> None:
        lock.acquire(False)
        order.append("reader")
        lock.release(False)
    def wait_for(condition: Callable[[], bool]) -> None:       # bounded: a hang fails the test
        deadline = time.monotonic() + 10
        while not condition():
            assert time.monotonic() < deadline
            time.sleep(0.001)
    threads = [threading.Thread(target=writer, daemon=True)]
    threads[0].start()
    wait_for(lambda: lock._writers_waiting == 1)               # the writer waits for both readers
    threads.append(threading.Thread(target=reader, daemon=True))
    threads[1].start()
    wait_for(lambda: lock._waiting == 2)                       # the new reader waits behind the writer
    assert order == []
    lock.release(False)
    assert order == []
    lock.release(False)
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads) and order == ["writer", "reader"]
    lock.acquire(True)                                         # free again, and nobody left waiting
    assert lock._waiting == 0 and lock._readers == 0
    lock.release(True)

def test_a_writer_that_ends_lets_the_waiting_readers_in_before_the_next_writer() -> None:
    """A thread that trains in a loop (a writer that takes the lock again at once) cannot starve
    a reader waiting on another thread (a checkpoint's read of the variables): the reader gets
    in after at most one more writer, counted in writer turns, not in time."""
    import threading

    from runtime.executable import ReadWriteLock
    lock = ReadWriteLock()
    turns: list[int] = []
    read_after: list[int] = []
    stop = threading.Event()

    def trainer() -> None:
        while not stop.is_set() and len(turns) < 200_000:
            lock.acquire(True)
            turns.append(1)
            lock.release(True)
    thread = threading.Thread(target=trainer, daemon=True)
    lock.acquire(True)
    thread.start()
    while not lock._writers_waiting:                           # the trainer waits for its turn
        threading.Event().wait(0.001)
    reader = threading.Thread(target=lambda: (lock.acquire(False), read_after.append(len(turns)),
                                              lock.release(False)), daemon=True)
    reader.start()
    while lock._waiting < 2:                                   # and so does the reader
        threading.Event().wait(0.001)
    lock.release(True)                                         # both waiting: the reader is let in
    reader.join(timeout=30)
    stop.set()
    thread.join(timeout=30)
    assert read_after and read_after[0] <= 1, (read_after, len(turns))


def test_session_uses_the_default_graph(graph) -> None:
    v = cc.Variable(np.ones(2, "float32"), name="v")
    with Session() as sess:
        assert sess.graph is graph
        np.testing.assert_array_equal(sess.run(v), [1.0, 1.0])


def test_an_output_that_is_the_fed_array_gets_the_result_numpy_would_give() -> None:
    """out= the very array fed (or a view of it): the kernels would read the feed in place while
    writing it, so a transpose, a reverse or a product read values they had already overwritten."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 64), name="x")
        results = [cc.transpose(x), cc.reverse(x, [0]), x @ x, x * 2.0]
    start = np.arange(64 * 64, dtype="float32").reshape(64, 64) / 4096
    expected = [start.T, start[::-1], start @ start, start * 2.0]
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            for result, want in zip(results, expected):
                fed = start.copy()
                assert sess.run(result, {x: fed}, out=fed) is fed
                np.testing.assert_allclose(fed, want, rtol=1e-6, err_msg=f"{target} {result.op.type}")
                # twice: the repeated-run path takes the same care
                fed = start.copy()
                sess.run(result, {x: fed}, out=fed)
                np.testing.assert_allclose(fed, want, rtol=1e-6, err_msg=f"{target} {result.op.type}")


def test_run_writes_into_preallocated_outputs() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 3), name="x")
        y = cc.exp(x) * 2.0
        total = cc.reduce_sum(y)
    xv = np.arange(6, dtype="float32").reshape(2, 3) / 10
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            buffer = np.empty((2, 3), "float32")
            first = sess.run(y, {x: xv}, out=buffer)
            assert first is buffer
            np.testing.assert_allclose(buffer, np.exp(xv) * 2, rtol=1e-6)
            pair = sess.run([y, total], {x: xv + 1}, out=[buffer, None])
            assert pair[0] is buffer
            np.testing.assert_allclose(buffer, np.exp(xv + 1) * 2, rtol=1e-6)
            np.testing.assert_allclose(pair[1], (np.exp(xv + 1) * 2).sum(), rtol=1e-6)
            # without out=, results are fresh arrays again and the buffer is left alone
            again = sess.run(y, {x: xv})
            assert again is not buffer
            np.testing.assert_allclose(buffer, np.exp(xv + 1) * 2, rtol=1e-6)
            with pytest.raises(ValueError):
                sess.run(y, {x: xv}, out=np.empty((3, 3), "float32"))


def test_fetches_and_feeds_by_name() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 3), name="x")
        w = cc.Variable(np.ones((3, 2), "float32"), name="w")
        h = cc.matmul(x, w, name="h")
        step = w.assign_add(cc.ones_like(w), name="step")
    with Session(graph) as sess:
        ones = np.ones((1, 3), "float32")
        np.testing.assert_array_equal(sess.run("h:0", {"x:0": ones}), [[3.0, 3.0]])
        out = np.empty((1, 2), "float32")
        values = sess.run({"h": ["h:0"], "w": w}, {"x": ones}, out={"h": [out]})
        assert values["h"][0] is out
        np.testing.assert_array_equal(out, [[3.0, 3.0]])
        assert sess.run("step") is None            # an operation, by its name: run, no value
        np.testing.assert_array_equal(sess.run(w), np.full((3, 2), 2.0))
        with pytest.raises(KeyError, match="no tensor named 'nope:0'"):
            sess.run(h, {"nope:0": ones})
        with pytest.raises(KeyError, match="no operation named 'nope'"):
            sess.run("nope")
        with pytest.raises(ValueError, match="'h:x' is not a tensor name"):
            sess.run("h:x")


@pytest.mark.parametrize("target", ["cpu", "reference", "cuda-emulated"])
def test_a_computed_tensor_can_be_fed_in_place_of_its_computation(target: str) -> None:
    """As TF1: feeding h (a matmul's result) or a constant replaces them for that run; what computes
    them is not run, nor needs its own feeds; variables and assignment results are refused."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 3), name="x")
        w = cc.Variable(np.ones((3, 2), "float32"), name="w")
        h = cc.matmul(x, w, name="h")
        scale = cc.constant(2.0, name="scale")
        y = cc.reduce_sum(cc.tanh(h) * scale)
        step = w.assign_add(cc.ones_like(w))
    ones = np.ones((4, 3), "float32")
    fed = np.full((4, 2), 0.5, "float32")
    with Session(graph, target=target) as sess:
        for _ in range(2):   # the second time through the repeated-run path
            np.testing.assert_allclose(sess.run(y, {h: fed}), 16 * np.tanh(0.5), rtol=1e-6)
        np.testing.assert_allclose(sess.run(y, {"h:0": fed, scale: np.float32(3.0)}), 24 * np.tanh(0.5), rtol=1e-6)
        np.testing.assert_allclose(sess.run(y, {x: ones}), 16 * np.tanh(3.0), rtol=1e-6)   # computed again
        np.testing.assert_allclose(sess.run([h, y], {h: fed})[0], fed)
        with pytest.raises(cc.FeedError, match="a variable: use Variable.load"):
            sess.run(y, {x: ones, w: np.zeros((3, 2), "float32")})
        with pytest.raises(cc.FeedError, match="the result of AssignAdd"):
            sess.run(y, {x: ones, step: np.zeros((3, 2), "float32")})
        with pytest.raises(cc.FeedError, match=r"cannot feed float64 data to MatMul output 'h'"):
            sess.run(y, {h: fed.astype("float64") * 1e300})    # beyond float32's range
        np.testing.assert_allclose(sess.run(y, {h: fed.astype("float64")}), 16 * np.tanh(0.5), rtol=1e-6)   # exact


@pytest.mark.parametrize("target", ["cpu", "reference", "cuda-emulated"])
@pytest.mark.parametrize("initializer, reset", [
    (lambda g, l, o: cc.global_variables_initializer(), {"g", "o"}),
    (lambda g, l, o: cc.local_variables_initializer(), {"l"}),
    (lambda g, l, o: cc.variables_initializer([l, o]), {"l", "o"}),
    (lambda g, l, o: cc.variables_initializer([]), set()),
])
def test_each_initializer_resets_only_its_variables(initializer, reset: set, target: str) -> None:
    """As TF1: global_variables_initializer resets the GLOBAL_VARIABLES collection (not local
    variables), local_variables_initializer the LOCAL_VARIABLES one, variables_initializer its list."""
    graph = cc.Graph()
    with graph.as_default():
        made = {"g": cc.Variable(np.zeros(2), name="g"),
                "l": cc.Variable(np.zeros(2), name="l", collections=[cc.GraphKeys.LOCAL_VARIABLES]),
                "o": cc.Variable(np.zeros(2), name="o", trainable=False)}
        bump = cc.group(*(cc.assign_add(v, [1.0, 1.0]) for v in made.values()))
        init = initializer(made["g"], made["l"], made["o"])
    assert cc.local_variables(graph) == [made["l"]] and made["l"] not in cc.global_variables(graph)
    with Session(graph, target=target) as sess:
        sess.run(init)
        sess.run(bump)
        sess.run(bump)
        with graph.as_default():   # made after the initializer first ran: a global one is reset too
            made["late"] = cc.Variable(np.zeros(2), name="late")
            sess.run(cc.assign_add(made["late"], [2.0, 2.0]))
        sess.run(init)
        for name, value in zip(made, sess.run(list(made.values()))):
            reset_now = name in reset or (name == "late" and "g" in reset)
            np.testing.assert_array_equal(value, [0.0, 0.0] if reset_now else [2.0, 2.0])


def test_a_compiled_step_run_directly_checks_its_feeds() -> None:
    """Executable.run and profile refuse a feed of another shape than the one compiled (its native
    code would read past the array: a segfault) and convert lossless dtypes, as sess.run does."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 64), name="x")
        y = cc.reduce_sum(x * 2.0)
    with Session(graph) as sess:
        exe = sess.compile(y, {x: np.ones((512, 64), "float32")})
        for call in (lambda feeds: exe.run(feeds), lambda feeds: exe.profile(feeds, runs=1)):
            with pytest.raises(cc.FeedError, match=r"'x:0' was compiled for shape \(512, 64\), got \(2, 64\)"):
                call({x: np.ones((2, 64), "float32")})
            with pytest.raises(cc.FeedError, match="without losing information"):
                call({x: np.full((512, 64), 1e300)})      # float64 beyond float32's range (1 + 1e-12 rounds)
            with pytest.raises(cc.FeedError, match="needs a value for 'x:0'"):
                call({})
        assert exe.run({x: np.ones((512, 64), "float16")})[0] == 512 * 64 * 2    # converted losslessly


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
def test_a_refused_out_array_leaves_nothing_behind_for_the_next_run(target: str) -> None:
    """A call whose second out= array has the wrong shape used to leave the first one in the
    step's reusable buffers: every later run (from any thread) wrote into that array and
    returned stale values."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (4,), name="x")
        doubled, shifted = x * 2.0, x + 1.0
    values = np.arange(4, dtype="float32")
    with Session(graph, target=target) as sess:
        sess.run([doubled, shifted], {x: values})
        mine = np.zeros(4, "float32")
        with pytest.raises(ValueError, match="out= needs a writeable array of shape"):
            sess.run([doubled, shifted], {x: values}, out=[mine, np.zeros(5, "float32")])
        mine[:] = -7.0
        got = sess.run([doubled, shifted], {x: values + 10.0})
    np.testing.assert_array_equal(got[0], (values + 10.0) * 2.0)
    np.testing.assert_array_equal(mine, np.full(4, -7.0))


def test_a_session_closed_while_a_run_compiles_does_not_run_on_initial_values(monkeypatch) -> None:
    """close() during a run's first compile (another thread's) used to let that run go on with
    variables made afresh from their initial values, returning numbers from them silently."""
    import runtime.session as session_module
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.zeros(4, "float32"), name="w")
        step = cc.assign_add(w, np.ones(4, "float32"))
        total = cc.reduce_sum(w)
    sess = Session(graph)
    for _ in range(5):
        sess.run(step)
    real_compile = session_module.compile_step

    def compile_then_close(*args, **kwargs):
        compiled = real_compile(*args, **kwargs)
        sess.close()          # as another thread's close() would land here
        return compiled
    monkeypatch.setattr(session_module, "compile_step", compile_then_close)
    with pytest.raises(RuntimeError, match="this Session is closed"):
        sess.run(total)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_a_tensor_fetched_twice_fills_the_out_array_at_each_place(target: str) -> None:
    """Targets were matched to fetches by tensor, so the first of two places got nothing."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (3,), name="x")
        doubled = x * 2.0
    values = np.array([1.0, 2.0, 3.0], "float32")
    with Session(graph, target=target) as sess:
        first, second = np.zeros(3, "float32"), np.zeros(3, "float32")
        got = sess.run([doubled, doubled], {x: values}, out=[first, second])
        assert got[0] is first and got[1] is second
        only_first = np.zeros(3, "float32")
        sess.run([doubled, doubled], {x: values}, out=[only_first, None])
    for array in (first, second, only_first):
        np.testing.assert_array_equal(array, values * 2.0)


def test_a_long_compile_says_what_it_is_doing_on_stderr(graph, monkeypatch, capsys) -> None:
    """A step of thousands of ops compiled for minutes without a word; past GRAPHGRAD_PROGRESS_AFTER
    seconds (0 here) each stage is named on stderr, and GRAPHGRAD_PROGRESS=0 silences it."""
    x = cc.placeholder("float32", (4,), name="x")
    y, z = cc.exp(x) * 2.0, cc.sin(x) + 1.0
    monkeypatch.setenv("GRAPHGRAD_PROGRESS_AFTER", "0")
    monkeypatch.setenv("GRAPHGRAD_PROGRESS_EVERY", "0")
    with Session(graph) as sess:
        sess.run(y, {x: np.ones(4, "float32")})
        lines = capsys.readouterr().err.splitlines()
        assert lines[0].startswith("graphgrad: compiling a step: simplify (") and "LLVM IR (" in "".join(lines)
        assert lines[-1].startswith("graphgrad: compiling a step: done in ")
        monkeypatch.setenv("GRAPHGRAD_PROGRESS", "0")
        sess.run(z, {x: np.ones(4, "float32")})
        assert "graphgrad:" not in capsys.readouterr().err


@pytest.mark.parametrize("target", ["cpu", "reference", "cuda-emulated"])
@pytest.mark.parametrize("out, message", [
    (np.zeros(2, "int32"), "out= needs an array that can take float32 values, got int32"),
    ([[0.0, 0.0]], r"out= needs a writeable array of shape \(2,\), got list"),
    (np.zeros(3, "float32"), r"out= needs a writeable array of shape \(2,\), got \(3,\)"),
])
def test_a_refused_out_array_is_refused_before_the_step_assigns(target: str, out: Any, message: str) -> None:
    v = cc.Variable(np.zeros(2, "float32"), name="v")
    step = cc.assign_add(v, [1.0, 1.0])
    with Session(target=target) as sess:
        with pytest.raises(ValueError, match=message):
            sess.run(step, out=out)
        np.testing.assert_array_equal(sess.run(v), [0.0, 0.0])


def test_a_session_s_with_block_makes_its_graph_the_default_and_load_finds_the_session() -> None:
    graph = cc.Graph()
    with graph.as_default():
        v = cc.Variable(np.zeros(2), name="v")
    with Session(graph=graph) as sess:
        doubled = v * 2.0                      # built in the session's graph, as in TF1
        assert doubled.graph is graph
        v.load(np.array([1.0, 2.0]))           # the default session
        np.testing.assert_array_equal(sess.run(doubled), [2.0, 4.0])
    assert cc.get_default_graph() is not graph


def test_memory_of_old_steps_and_of_fed_arrays_is_let_go() -> None:
    import weakref

    from runtime.session import STEPS_KEEPING_BUFFERS
    x = cc.placeholder("float32", (None, 4), name="x")
    y = cc.reduce_sum(cc.exp(x) * 2.0, axis=1)
    with Session() as sess:
        steps = []
        for batch in range(1, STEPS_KEEPING_BUFFERS + 4):   # one compiled step per batch size
            fed = np.full((batch, 4), 0.5, "float32")
            np.testing.assert_allclose(sess.run(y, {x: fed}), np.full(batch, 8 * np.exp(0.5)), rtol=1e-6)
            steps.append(sess.compile(y, {x: fed}))
        assert [bool(step._idle) for step in steps].count(True) == STEPS_KEEPING_BUFFERS
        # a step that let go of its buffers runs again, allocating them anew
        np.testing.assert_allclose(sess.run(y, {x: np.zeros((1, 4), "float32")}), [8.0])
        # neither a feed nor an out= array is kept alive by the session after the run
        fed, target = np.ones((3, 4), "float32"), np.empty(3, "float32")
        sess.run(y, {x: fed}, out=target)
        references = weakref.ref(fed), weakref.ref(target)
        del fed, target
        assert references[0]() is None and references[1]() is None


def test_tf1_session_options_and_interactive_session() -> None:
    config = cc.ConfigProto(allow_soft_placement=True, log_device_placement=False)
    config.gpu_options.allow_growth = True
    graph = cc.Graph()
    with graph.as_default():
        doubled = cc.constant(2.0) * 2.0
    with Session(graph, config=config) as sess:
        assert sess.config is config and sess.run(doubled) == 4.0
    from runtime import InteractiveSession
    interactive = InteractiveSession(graph)
    try:
        assert cc.get_default_graph() is graph and cc.get_default_session() is interactive
        assert doubled.eval() == 4.0
    finally:
        interactive.close()
    assert cc.get_default_graph() is not graph and cc.get_default_session() is None


def test_interactive_sessions_closed_out_of_order_leave_the_other_defaults() -> None:
    # TF1: an InteractiveSession's defaults do not nest: closing the first of two leaves the second's
    # graph the default (here the first's came back); without graph= it pushes no graph, so
    # reset_default_graph still works (here it was refused).
    from runtime import InteractiveSession
    first_graph, second_graph = cc.Graph(), cc.Graph()
    first, second = InteractiveSession(first_graph), InteractiveSession(second_graph)
    try:
        first.close()
        assert cc.get_default_graph() is second_graph and cc.get_default_session() is second
        assert cc.constant(3.0).eval() == 3.0
    finally:
        second.close()
    assert cc.get_default_graph() not in (first_graph, second_graph) and cc.get_default_session() is None
    prompt = InteractiveSession()
    try:
        cc.reset_default_graph()
        assert prompt.graph is not cc.get_default_graph()
    finally:
        prompt.close()


def test_run_takes_tf1s_options_and_run_metadata_as_none(graph) -> None:
    doubled = cc.constant(2.0) * 2.0
    with Session(graph) as sess:
        assert sess.run(doubled, None, None, None) == 4.0
        assert sess.run(doubled, options=None, run_metadata=None) == 4.0
        with pytest.raises(TypeError, match="options and run_metadata .* are not supported"):
            sess.run(doubled, None, object())


def test_an_initializer_runs_after_its_control_inputs(graph) -> None:
    # TF1 runs an op's control inputs first; the host-side initializer skipped them.
    v = cc.Variable(np.zeros(2, "float32"), name="v")
    w = cc.Variable(np.ones(2, "float32"), name="w")
    bumped = v.assign_add([1.0, 1.0])
    with cc.control_dependencies([bumped]):
        init_w = cc.variables_initializer([w])
    with Session(graph) as sess:
        sess.run(init_w)
        np.testing.assert_array_equal(sess.run(v), [1.0, 1.0])
        # reached by the other fetches too: run once, in the step (a group holding the initializer)
        sess.run(cc.group(init_w))
        np.testing.assert_array_equal(sess.run(v), [2.0, 2.0])
        sess.run([init_w, bumped * 2.0])
        np.testing.assert_array_equal(sess.run(v), [3.0, 3.0])
        sess.run([init_w, v * 3.0])       # reads v only: the control input runs first, once
        np.testing.assert_array_equal(sess.run(v), [4.0, 4.0])


def test_any_mapping_of_fetches_comes_back_as_its_kind(graph) -> None:
    # TF1 takes any collections.abc.Mapping; only dicts were taken here.
    import types

    class Frozen(collections.abc.Mapping):
        def __init__(self, items: dict) -> None:
            self._items = dict(items)

        def __getitem__(self, key: str) -> Any:
            return self._items[key]

        def __iter__(self) -> Any:
            return iter(self._items)

        def __len__(self) -> int:
            return len(self._items)

    a = cc.constant(2.0)
    with Session(graph) as sess:
        proxied = sess.run(types.MappingProxyType({"a": a, "b": a * 3.0}))
        frozen = sess.run(Frozen({"a": a, "nested": [a * 4.0]}))
    assert isinstance(proxied, types.MappingProxyType) and dict(proxied) == {"a": 2.0, "b": 6.0}
    assert isinstance(frozen, Frozen) and frozen["a"] == 2.0 and frozen["nested"] == [8.0]


def test_a_compiled_step_takes_none_for_no_feeds_as_session_run_does() -> None:
    graph = cc.Graph()
    with graph.as_default():
        v = cc.Variable(np.ones(3, "float32"), name="v")
        total = cc.reduce_sum(v * 2.0)
    with Session(graph) as sess:
        exe = sess.compile(total)
        (value,) = exe.run(None)
        assert value == 6.0
        assert exe.profile(None, runs=1)
