"""``cc.cond``, ``cc.while_loop``, ``cc.fori_loop`` and ``cc.scan`` beyond the op table's rows:
assignments inside branches and loops, nested structures, shape invariants, gradients with the
usual options, the compiled schedule, and errors at build time with the user's line. Every check
runs on the compiled cpu target and on the numpy reference."""
from __future__ import annotations

import collections
import sys

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session

TARGETS = ["cpu", "reference"]
HERE = __file__


def _line_of(marker: str) -> int:
    with open(HERE, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if marker in line and "_line_of" not in line:
                return number
    raise AssertionError(marker)


@pytest.mark.parametrize("target", TARGETS)
def test_an_assignment_in_the_branch_not_taken_does_not_happen(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        flag = cc.placeholder("bool", shape=(), name="flag")
        taken = cc.Variable(np.float32(0.0), name="taken")
        skipped = cc.Variable(np.float32(0.0), name="skipped")
        out = cc.cond(flag, lambda: (cc.assign_add(taken, 1.0), cc.constant(1.0))[1],
                      lambda: (cc.assign_add(skipped, 1.0), cc.constant(2.0))[1])
    with Session(graph, target=target) as sess:
        assert sess.run(out, {flag: True}) == 1.0
        assert sess.run(out, {flag: True}) == 1.0
        assert sess.run(out, {flag: False}) == 2.0
        assert sess.run([taken, skipped]) == [2.0, 1.0]


@pytest.mark.parametrize("target", TARGETS)
def test_a_branch_run_only_for_its_assignments_runs_when_its_group_is_fetched(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        flag = cc.placeholder("bool", shape=(), name="flag")
        hits = cc.Variable(np.int32(0), name="hits")
        update = cc.group(cc.cond(flag, lambda: (cc.assign_add(hits, 1), cc.constant(0))[1], lambda: cc.constant(0)))
    with Session(graph, target=target) as sess:
        for value in (True, False, True):
            sess.run(update, {flag: value})
        assert sess.run(hits) == 2


@pytest.mark.parametrize("target", TARGETS)
def test_a_counter_incremented_in_the_body_ends_equal_to_the_trip_count(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        limit = cc.placeholder("int32", shape=(), name="limit")
        counter = cc.Variable(np.int32(0), name="counter")

        def body(i):
            cc.assign_add(counter, 1)
            return i + 1
        trips = cc.while_loop(lambda i: i < limit, body, cc.constant(0))
    with Session(graph, target=target) as sess:
        assert sess.run(trips, {limit: 5}) == 5
        assert sess.run(counter) == 5
        sess.run(trips, {limit: 3})
        assert sess.run(counter) == 8
        assert sess.run(trips, {limit: -1}) == 0      # the body never runs
        assert sess.run(counter) == 8


@pytest.mark.parametrize("target", TARGETS)
def test_an_assignment_in_a_loop_body_is_seen_by_the_next_iteration(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        scale = cc.Variable(np.array(1.0), name="scale")

        def body(i, total):
            new_total = total + scale                  # the value at the start of this iteration
            cc.assign(scale, scale * 2.0)
            return i + 1, new_total
        _, total = cc.while_loop(lambda i, total: i < 3, body, (0, cc.constant(0.0, "float64")))
    with Session(graph, target=target) as sess:
        assert sess.run(total) == 1.0 + 2.0 + 4.0
        assert sess.run(scale) == 8.0


@pytest.mark.parametrize("target", TARGETS)
def test_nested_loop_variables_keep_their_structure(target: str) -> None:
    Pair = collections.namedtuple("Pair", "low high")
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", shape=(2,), name="x")

        def body(state):
            return {"step": state["step"] + 1, "pair": Pair(state["pair"].low * 2.0, [state["pair"].high[0] + x])}
        final = cc.while_loop(lambda state: state["step"] < 3, body,
                              {"step": cc.constant(0), "pair": Pair(x, [x * 0.0])})
    assert isinstance(final, dict) and isinstance(final["pair"], Pair) and isinstance(final["pair"].high, list)
    with Session(graph, target=target) as sess:
        result = sess.run(final, {x: np.array([1.0, -1.0])})
    assert result["step"] == 3
    np.testing.assert_allclose(result["pair"].low, [8.0, -8.0])
    np.testing.assert_allclose(result["pair"].high[0], [3.0, -3.0])


def test_a_shape_invariant_allows_a_growing_loop_variable_on_the_reference() -> None:
    graph = cc.Graph()
    with graph.as_default():
        rows = cc.placeholder("float64", shape=(1, 2), name="rows")
        _, grown = cc.while_loop(lambda i, r: i < 2, lambda i, r: (i + 1, cc.concat([r, r], axis=0)),
                                 (0, rows), shape_invariants=(cc.constant(0).shape, (None, 2)))
    assert grown.shape == (None, 2)
    value = np.array([[1.0, 2.0]])
    with Session(graph, target="reference") as sess:
        assert sess.run(grown, {rows: value}).shape == (4, 2)
    with Session(graph) as sess, pytest.raises(cc.CompileError, match="keeps each loop variable's shape"):
        sess.run(grown, {rows: value})


@pytest.mark.parametrize("target", TARGETS)
def test_gradients_options_work_across_control_flow(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", shape=(3,), name="x")
        w = cc.placeholder("float64", shape=(3,), name="w")
        _, y = cc.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v * w), (0, x), maximum_iterations=2)
        z = cc.cond(cc.reduce_sum(x) > -1e9, lambda: y * y, lambda: y)
        weights = cc.constant(np.array([1.0, 2.0, 3.0]))
        dx_weighted, dw_weighted = cc.gradients(z, [x, w], grad_ys=weights)
        (dx_stopped,) = cc.gradients(z, [x], stop_gradients=[y])
        other = cc.placeholder("float64", shape=(3,), name="other")
        (dnothing,) = cc.gradients(z, [other], unconnected_gradients="zero")
    xv, wv = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.5, -2.0])
    with Session(graph, target=target) as sess:
        got = sess.run([dx_weighted, dw_weighted, dnothing], {x: xv, w: wv, other: xv})
    assert dx_stopped is None          # every path from x to z passes through y
    # z = (x w^2)^2 = x^2 w^4
    np.testing.assert_allclose(got[0], weights.op.attrs["value"] * 2 * xv * wv ** 4)
    np.testing.assert_allclose(got[1], weights.op.attrs["value"] * 4 * xv ** 2 * wv ** 3)
    np.testing.assert_allclose(got[2], np.zeros(3))


@pytest.mark.parametrize("target", TARGETS)
def test_a_custom_gradient_inside_a_scan_body_is_used(target: str) -> None:
    @cc.custom_gradient
    def clipped_identity(v):
        return cc.identity(v), lambda dy: cc.clip_by_value(dy, -0.5, 0.5)

    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", shape=(3, 2), name="x")
        stacked = cc.scan(lambda acc, e: clipped_identity(acc + e) * 1.0, x, initializer=cc.zeros_like(x[0]))
        (dx,) = cc.gradients(cc.reduce_sum(stacked * 10.0), [x])
    with Session(graph, target=target) as sess:
        got = sess.run(dx, {x: np.ones((3, 2))})
    # every step's gradient (10 from the loss, plus what flows back from later steps) is clipped to 0.5
    np.testing.assert_allclose(got, np.full((3, 2), 0.5))


@pytest.mark.parametrize("target", TARGETS)
def test_minimize_trains_through_a_scan(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", shape=(4, 3), name="x")
        decay = cc.Variable(np.array(0.1), name="decay")
        states = cc.scan(lambda h, e: h * decay + e, x, initializer=cc.zeros_like(x[0]))
        loss = cc.reduce_sum(cc.square(states[3] - 2.0))
        train = optim.GradientDescentOptimizer(0.01).minimize(loss)
    feed = {x: np.ones((4, 3))}
    with Session(graph, target=target) as sess:
        before = sess.run(loss, feed)
        for _ in range(50):
            sess.run(train, feed)
        after = sess.run(loss, feed)
    assert after < 0.05 * before


def test_the_kernels_dump_shows_branches_and_loops() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(4,), name="x")
        y = cc.cond(cc.reduce_sum(x) > 0.0, lambda: cc.exp(x), lambda: x)
        z = cc.fori_loop(0, 3, lambda i, v: v * 2.0, y)
    with Session(graph) as sess:
        text = sess.compile(z, {x: np.ones(4, "float32")}).dump("kernels")
    schedule = text[text.index("schedule (branches and loops):"):]
    assert "  if b" in schedule and "  else:" in schedule and "  loop:" in schedule and "while b" in schedule
    assert "region" in text and "loop variable 1" in text


def test_numerics_are_checked_inside_a_loop() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(2,), name="x")
        _, y = cc.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, cc.log(v - 1.0)), (0, x))
    with Session(graph, check_numerics=True) as sess:
        with pytest.raises(cc.NumericsError):
            sess.run(y, {x: np.array([3.0, 4.0], "float32")})


def test_one_session_runs_loops_of_different_trip_counts_on_the_same_buffers() -> None:
    graph = cc.Graph()
    with graph.as_default():
        n = cc.placeholder("int32", shape=(), name="n")
        x = cc.placeholder("float32", shape=(None,), name="x")
        _, y = cc.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v + 1.0), (0, x))
    with Session(graph) as sess:
        for count in (4, 0, 7, 1):
            np.testing.assert_array_equal(sess.run(y, {n: count, x: np.zeros(3, "float32")}), np.full(3, count))


# -- errors at build time ------------------------------------------------------------------------

def test_a_body_that_changes_a_loop_variables_shape_is_an_error_at_the_users_line() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(2, 3), name="x")
        with pytest.raises(cc.ShapeError) as error:
            cc.while_loop(lambda v: cc.reduce_sum(v) < 10.0, lambda v: cc.concat([v, v], 0), x)  # grows
    message = str(error.value)
    assert "changes the shape of loop variable 0 from (2, 3) to (4, 3)" in message
    assert f"{HERE}:{_line_of('# grows')}" in message


def test_branches_with_different_dtypes_are_an_error_naming_both_branches() -> None:
    def as_float():
        return cc.constant(1.0)

    def as_int():
        return cc.constant(1)
    graph = cc.Graph()
    with graph.as_default():
        p = cc.placeholder("bool", shape=(), name="p")
        with pytest.raises(cc.DTypeError) as error:
            cc.cond(p, as_float, as_int)  # mixed dtypes
    message = str(error.value)
    assert "float32 in true_fn" in message and "int32 in false_fn" in message
    assert f"{HERE}:{_line_of('def as_float')}" in message and f"{HERE}:{_line_of('def as_int')}" in message
    assert f"{HERE}:{_line_of('# mixed dtypes')}" in message


@pytest.mark.parametrize("predicate, error, words", [
    (lambda x: x > 0.0, cc.ShapeError, "must be a scalar, got shape (3,)"),
    (lambda x: cc.reduce_sum(x), cc.DTypeError, "must be bool, got float32"),
])
def test_a_predicate_that_is_not_a_scalar_bool_is_an_error(predicate, error, words) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(3,), name="x")
        with pytest.raises(error) as raised:
            cc.cond(predicate(x), lambda: x, lambda: -x)  # bad predicate
    assert words in str(raised.value) and f"{HERE}:{_line_of('# bad predicate')}" in str(raised.value)


def test_other_mistakes_are_clear_errors() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(3,), name="x")
        with pytest.raises(ValueError, match="different structures"):
            cc.cond(cc.constant(True), lambda: (x, x), lambda: x)
        with pytest.raises(TypeError, match="must return a scalar bool tensor"):
            cc.while_loop(lambda v: v, lambda v: v, x)
        with pytest.raises(ValueError, match=r"returns \[tensor\] but loop_vars is \(tensor, tensor\)"):
            cc.while_loop(lambda a, b: cc.constant(True), lambda a, b: [a], (x, x))
        with pytest.raises(cc.DTypeError, match="changes loop variable 0 from float32 to int32"):
            cc.while_loop(lambda v: cc.constant(True), lambda v: cc.cast(v, "int32"), x)
        with pytest.raises(TypeError, match="maximum_iterations must be a Python int"):
            cc.while_loop(lambda v: cc.constant(True), lambda v: v, x, maximum_iterations=cc.constant(3))
        with pytest.raises(cc.ShapeError, match="must be known when the graph is built"):
            cc.scan(lambda a, e: a + e, cc.placeholder("float32", shape=(None, 2)))
        with pytest.raises(TypeError, match="must be callable"):
            cc.cond(cc.constant(True), x, lambda: x)
        _, unbounded = cc.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * cc.sin(v)), (0, x))
        (first,) = cc.gradients(cc.reduce_sum(unbounded), [x])
        with pytest.raises(NotImplementedError, match="second derivatives through a while_loop without"):
            cc.gradients(cc.reduce_sum(first), [x])


@pytest.mark.parametrize("target", TARGETS + ["cuda-emulated"])
def test_gradients_through_a_loop_without_a_bound_grow_its_stacks_as_it_runs(target: str) -> None:
    """No maximum_iterations: the forward loop's stacks grow at run time (16 rows, then doubling),
    so one Session runs 0, 1, 17 and 100 iterations, and fewer again, with the same buffers."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", shape=(3,), name="x")
        n = cc.placeholder("int32", shape=(), name="n")
        _, y = cc.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, cc.sin(v) * 0.9 + x), (0, x))
        (dx,) = cc.gradients(cc.reduce_sum(y * y), [x])
    xv = np.array([0.1, -0.2, 0.3])

    def numeric(sess, count, eps=1e-6):
        grad = np.zeros(3)
        for k in range(3):
            shifted = [xv.copy(), xv.copy()]
            shifted[0][k] += eps
            shifted[1][k] -= eps
            values = [float(np.sum(sess.run(y, {x: v, n: count}) ** 2)) for v in shifted]
            grad[k] = (values[0] - values[1]) / (2 * eps)
        return grad
    with Session(graph, target=target) as sess:
        for count in (0, 1, 17, 100, 3):
            np.testing.assert_allclose(sess.run(dx, {x: xv, n: count}), numeric(sess, count), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("target", TARGETS + ["cuda-emulated"])
def test_gradients_through_nested_loops_without_bounds(target: str) -> None:
    """An unbounded inner loop inside an outer one, its trip count set by the outer index: the
    inner loop's stacks stay stacks in the outer step (they were plain buffers once, and growing
    them reallocated memory numpy owned)."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", shape=(3,), name="x")

        def outer(i, h):
            _, inner = cc.while_loop(lambda j, g: j < i + 1, lambda j, g: (j + 1, cc.sin(g) * 1.5), (0, h))
            return i + 1, inner
        _, y = cc.while_loop(lambda i, h: i < 3, outer, (0, x))
        (dx,) = cc.gradients(cc.reduce_sum(y), [x])
    xv = np.array([0.3, -0.7, 1.1])
    value, slope = xv.copy(), np.ones(3)
    for _ in range(1 + 2 + 3):
        slope, value = slope * 1.5 * np.cos(value), np.sin(value) * 1.5
    with Session(graph, target=target) as sess:
        for _ in range(3):
            got_value, got_slope = sess.run([y, dx], {x: xv})
            np.testing.assert_allclose(got_value, value, rtol=1e-12)
            np.testing.assert_allclose(got_slope, slope, rtol=1e-12)


def test_an_empty_scan_with_an_initializer_gives_no_rows() -> None:
    graph = cc.Graph()
    with graph.as_default():
        out = cc.scan(lambda a, e: a + e, cc.constant(np.zeros((0, 2))), initializer=cc.constant(np.ones(2)))
    assert out.shape == (0, 2)
    with Session(graph) as sess:
        assert sess.run(out).shape == (0, 2)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


@pytest.mark.parametrize("target", TARGETS)
def test_a_read_built_before_a_branch_that_assigns_sees_the_start_value(target: str) -> None:
    """``before`` may not be fused into ``after``'s kernel, which runs after the branch wrote v in
    place; a view of v built before the branch is copied before it too."""
    graph = cc.Graph()
    with graph.as_default():
        p = cc.placeholder("bool", (), name="p")
        v = cc.Variable(np.array([[2.0, 4.0]], "float32"), name="v")
        before = v + v
        view = cc.reshape(v, (2,))
        branch = cc.cond(p, lambda: v.assign_sub(v * 0.25), lambda: v * 1.0)
        after = v * 10.0 - before
        seen = view * 1.0 + cc.reshape(after, (2,))
    with Session(graph, target=target) as sess:
        values = sess.run([after, branch, seen], {p: True})
    np.testing.assert_array_equal(values[0], [[11.0, 22.0]])
    np.testing.assert_array_equal(values[1], [[1.5, 3.0]])
    np.testing.assert_array_equal(values[2], [13.0, 26.0])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("construct", ["cond", "while_loop"])
def test_an_assignment_built_before_a_construct_that_assigns_the_same_variable_is_refused(
        target: str, construct: str) -> None:
    """Which value the construct reads and which one the variable keeps would depend on an order
    nothing gives: both targets say so, naming both lines; built after the construct, it applies."""
    graph = cc.Graph()
    with graph.as_default():
        v = cc.Variable(np.array([100.0], "float32"), name="v")
        earlier = v.assign([1.0])

        def build() -> cc.Tensor:
            if construct == "cond":
                return cc.cond(cc.constant(True), lambda: v.assign(v * 0.5), lambda: v * 1.0)
            return cc.while_loop(lambda i: i < 2, lambda i: cc.tuple([i + 1], control_inputs=[v.assign_add([1.0])]),
                                 [0])
        made = build()
        later = v.assign([7.0])
    with Session(graph, target=target) as sess:
        with pytest.raises(cc.CompileError, match=r"assigns the variable 'v', which Assign .* \(at [^)]*:"
                                                  + str(earlier.op.location.lineno) + r"\), built before it"):
            sess.run([earlier, made])
        sess.run([made, later])
        np.testing.assert_array_equal(sess.run(v), [7.0])


def test_what_a_branch_or_body_builds_cannot_be_fetched_or_merged_from_outside() -> None:
    """A tensor built inside a cond branch or a loop body (a summary too) is refused with the
    reason and both lines, not computed for a branch that did not run or failed with a KeyError."""
    built: dict[str, cc.Tensor] = {}

    def true_fn() -> cc.Tensor:
        built["branch"] = x * 10.0
        built["summary"] = cc.summary.scalar("inside", cc.reduce_sum(built["branch"]))
        return x + 1.0

    def body(i: cc.Tensor, value: cc.Tensor) -> tuple:
        built["body"] = value * 2.0
        return i + 1, built["body"]
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (2,), name="x")
        picked = cc.cond(cc.reduce_sum(x) > 0.0, true_fn, lambda: x - 1.0)
        _, looped = cc.while_loop(lambda i, v: i < 3, body, [cc.constant(0), x])
        with pytest.raises(ValueError, match=r"summary.merge: the summary .* is inside a cond branch or a loop body"):
            cc.summary.merge_all()
    with Session(graph) as sess:
        for name in ("branch", "body", "summary"):
            with pytest.raises(ValueError, match=r"cannot fetch .* computed inside a cond branch or a loop body"):
                sess.run(built[name], {x: np.ones(2, "float32")})
        np.testing.assert_array_equal(sess.run([picked, looped], {x: np.ones(2, "float32")}), [[2.0, 2.0], [8.0, 8.0]])


@pytest.mark.parametrize("target", TARGETS + ["cuda-emulated"])
def test_a_branch_reads_a_captured_scalar_constant(target: str) -> None:
    # The constant is copied into the branch's parameter before the branch runs (it was copied by
    # a kernel that neither branch's schedule listed, and read as 0).
    graph = cc.Graph()
    with graph.as_default():
        w = cc.placeholder("float32", (), name="w")
        c = cc.constant(3.0)
        y = cc.cond(w > 0.5, lambda: w * c, lambda: w + c)
        (slope,) = cc.gradients(y, [w], grad_ys=cc.constant(2.0))
        (curvature,) = cc.hessians(cc.cond(w > 0.5, lambda: cc.sin(w * c), lambda: w), [w])
    with Session(graph, target=target) as sess:
        np.testing.assert_allclose(sess.run([y, slope, curvature], {w: 0.7}),
                                   [2.1, 6.0, -9.0 * np.sin(2.1)], rtol=1e-6)
        np.testing.assert_allclose(sess.run([y, slope], {w: 0.2}), [3.2, 2.0], rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS + ["cuda-emulated"])
def test_a_branch_and_a_loop_read_a_variable_after_their_control_dependencies(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        v = cc.Variable(np.float64(2.0), name="v")
        x = cc.placeholder("float64", (), name="x")
        with cc.control_dependencies([v.assign(3.0)]):
            _, h = cc.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h * v), (0, x))
            y = cc.cond(x > 0.0, lambda: x * v, lambda: x)
    with Session(graph, target=target) as sess:
        assert sess.run([h, y], {x: 1.0}) == [27.0, 3.0]


@pytest.mark.parametrize("target", TARGETS + ["cuda-emulated"])
def test_a_loop_condition_sees_what_the_body_assigns(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        v = cc.Variable(np.float32(0.0), name="v")
        (trips,) = cc.while_loop(lambda i: v < 5.0, lambda i: [(v.assign_add(1.0), i + 1)[1]], [0],
                                 maximum_iterations=50,    # a bound, so that a wrong answer is no hang
                                 return_same_structure=True)
    with Session(graph, target=target) as sess:
        assert sess.run(trips) == 5 and sess.run(v) == 5.0


@pytest.mark.parametrize("target", TARGETS)
def test_a_gradient_does_not_make_a_construct_s_assignments_again(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (), name="x")
        trips = cc.Variable(np.float64(0.0), name="trips")
        moving = cc.Variable(np.float64(0.0), name="moving")

        def body(i, h):
            with cc.control_dependencies([trips.assign_add(1.0)]):
                return i + 1, h * x
        _, h = cc.while_loop(lambda i, h: i < 3, body, (0, x))
        # The TF1 batch-norm idiom: a moving average updated in the training branch only.
        y = cc.cond(x > 0.0, lambda: (moving.assign(moving * 0.5 + x), h * 2.0)[1], lambda: h)
        (slope,) = cc.gradients(y, [x])
    with Session(graph, target=target) as sess:
        assert sess.run([y, slope], {x: 2.0}) == [32.0, 64.0]      # 2 x**4, 8 x**3
        assert sess.run([trips, moving]) == [3.0, 2.0]


@pytest.mark.parametrize("construct", ["while", "cond"])
def test_the_gradient_of_a_construct_that_reads_a_variable_it_assigns_is_refused(construct: str) -> None:
    with cc.Graph().as_default():
        x = cc.placeholder("float64", (), name="x")
        v = cc.Variable(np.float64(1.0), name="v")

        def step(h):
            product = h * v    # reading v here and assigning it below: the gradient would need this v
            with cc.control_dependencies([product]):
                v.assign_add(1.0)
            return product
        if construct == "while":
            _, y = cc.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, step(h)), (0, x))
        else:
            y = cc.cond(x > 0.0, lambda: step(x), lambda: x)
        with pytest.raises(cc.NoGradientError, match="reads variable 'v', which that function also assigns") as error:
            cc.gradients(y, [x])
    assert f"test_control_flow.py:{_line_of('product = h * v')}" in str(error.value)


def test_fori_loop_counts_in_the_dtype_of_a_tensor_bound() -> None:
    with cc.Graph().as_default():
        upper = cc.placeholder("int64", (), name="upper")
        total = cc.fori_loop(0, upper, lambda i, acc: acc + cc.cast(i, "float64"), cc.constant(0.0, "float64"))
        with Session() as sess:
            assert sess.run(total, {upper: 5}) == 10.0
        with pytest.raises(cc.DTypeError, match="fori_loop: the bounds must be integers"):
            cc.fori_loop(0, cc.constant(2.5), lambda i, acc: acc, cc.constant(0.0))


@pytest.mark.parametrize("loop_vars, body", [
    ({"i": 0, "v": 1.0}, lambda d: {"i": d["i"] + 1, "vel": d["v"] * 0.5}),
    ((0, (1.0,)), lambda a, b: ((a + 1,), b)),
], ids=["dict-keys", "nesting"])
def test_a_body_returning_another_structure_is_refused(loop_vars, body) -> None:
    with cc.Graph().as_default():
        condition = (lambda d: d["i"] < 3) if isinstance(loop_vars, dict) else (lambda a, b: True)
        with pytest.raises(ValueError, match="while_loop: body .* returns .* but loop_vars is"):
            cc.while_loop(condition, body, loop_vars)


def test_the_gradient_of_a_loop_whose_variable_changes_shape_is_refused() -> None:
    with cc.Graph().as_default():
        x = cc.placeholder("float64", (2,), name="x")
        _, grown = cc.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, cc.concat([v, v[-1:] * 2.0], 0)), (0, x),
                                 shape_invariants=((), (None,)))
        with Session(target="reference") as sess:     # the forward loop runs there
            np.testing.assert_allclose(sess.run(grown, {x: [1.0, 3.0]}), [1, 3, 6, 12, 24])
        # Its gradient keeps every iteration's value: the loop says so when it runs (the size
        # relaxed by shape_invariants may well stay as it is, see the next test).
        (slope,) = cc.gradients(cc.reduce_sum(grown), [x])
        with Session(target="reference") as sess:
            with pytest.raises(cc.NoGradientError, match="changes the shape of loop variable 1 .from .2,. to .3,.."):
                sess.run(slope, {x: [1.0, 3.0]})


@pytest.mark.parametrize("target", TARGETS)
def test_a_loop_whose_shape_invariants_relax_a_size_it_keeps_is_differentiated(target: str) -> None:
    # Common TF1 code relaxes a size in shape_invariants that the body never changes.
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float64", (3, 4), name="x")
        _, doubled = cc.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), (0, x),
                                   shape_invariants=((), (None, 4)))
        (slope,) = cc.gradients(cc.reduce_sum(doubled * doubled), [x])
    with Session(graph, target=target) as sess:
        value = np.arange(12.0).reshape(3, 4)
        np.testing.assert_allclose(sess.run(slope, {x: value}), 2.0 * 64.0 * value)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("nesting, expected", [("cond-in-while", 2.0), ("while-in-while", 6.0),
                                               ("while-in-cond", 2.0), ("cond-in-cond", 1.0)])
def test_an_assignment_in_a_nested_construct_runs_with_it(target: str, nesting: str, expected: float) -> None:
    # The inner construct's traced ops belong to its regions, not to the outer function's
    # assignments (they were refused as conflicting with themselves).
    graph = cc.Graph()
    with graph.as_default():
        v = cc.Variable(np.float64(0.0), name="v")
        zero = cc.constant(0.0, "float64")
        if nesting == "cond-in-while":
            def body(i):
                bump = cc.cond(i >= 1, lambda: v.assign_add(1.0), lambda: zero)
                return i + 1 + cc.cast(bump, "int32") * 0
            result = cc.while_loop(lambda i: i < 3, body, cc.constant(0))
        elif nesting == "while-in-while":
            def inner(j):
                with cc.control_dependencies([v.assign_add(1.0)]):
                    return j + 1
            result = cc.while_loop(lambda i: i < 3, lambda i: i + 1 + 0 * cc.while_loop(lambda j: j < 2, inner, 0), 0)
        elif nesting == "while-in-cond":
            def counted():
                def inner(j):
                    with cc.control_dependencies([v.assign_add(1.0)]):
                        return j + 1
                return cc.while_loop(lambda j: j < 2, inner, 0)
            result = cc.cond(cc.constant(True), counted, lambda: cc.constant(0))
        else:
            result = cc.cond(cc.constant(True), lambda: cc.cond(cc.constant(True), lambda: v.assign_add(1.0),
                                                                lambda: zero), lambda: zero)
    with Session(graph, target=target) as sess:
        sess.run(result)
        assert sess.run(v) == expected


@pytest.mark.parametrize("target", TARGETS + ["cuda-emulated"])
def test_dropout_in_a_branch_or_a_loop_body_has_the_gradient_of_the_mask_it_drew(target: str) -> None:
    # The backward pass used to draw the numbers again with an advanced count: another mask. A
    # branch draws with the step's count; a loop keeps each iteration's numbers for its gradient.
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (6,), name="x")
        rows = cc.placeholder("float64", (4, 6), name="rows")
        training = cc.placeholder("bool", (), name="training")
        branch = cc.cond(training, lambda: cc.nn.dropout(x, rate=0.5, seed=3), lambda: x)
        (branch_slope,) = cc.gradients(cc.reduce_sum(branch * branch), [x])
        summed = cc.scan(lambda total, row: total + cc.nn.dropout(row, rate=0.5, seed=4), rows,
                         initializer=cc.zeros((6,), "float64"))
        (loop_slope,) = cc.gradients(cc.reduce_sum(summed[-1]), [rows])
    feed = {x: np.arange(1.0, 7.0), rows: np.ones((4, 6)), training: True}
    masks = []
    with Session(graph, target=target) as sess:
        for _ in range(3):
            value, slope, partial_sums, row_slope = sess.run([branch, branch_slope, summed, loop_slope], feed)
            np.testing.assert_allclose(slope, 2.0 * value * np.where(value != 0.0, 2.0, 0.0))
            drawn = np.diff(np.vstack([np.zeros(6), partial_sums]), axis=0)      # each row's kept x 2
            np.testing.assert_allclose(row_slope, drawn)
            masks.append(value != 0.0)
    assert any((m != masks[0]).any() for m in masks[1:])     # a new mask every step


@pytest.mark.parametrize("target", TARGETS)
def test_layers_dropout_with_a_tensor_switch_in_a_loop_body_has_the_gradient_of_its_mask(target: str) -> None:
    # TF1's layers.dropout(training=tensor) is a cond: inside a scan its gradient drew another mask.
    graph = cc.Graph()
    with graph.as_default():
        rows = cc.placeholder("float64", (4, 6), name="rows")
        training = cc.placeholder("bool", (), name="training")
        summed = cc.scan(lambda total, row: total + cc.layers.dropout(row, rate=0.5, training=training), rows,
                         initializer=cc.zeros((6,), "float64"))
        (row_slope,) = cc.gradients(cc.reduce_sum(summed[-1]), [rows])
    with Session(graph, target=target) as sess:
        for switch in (True, True, False):
            partial_sums, slope = sess.run([summed, row_slope], {rows: np.ones((4, 6)), training: switch})
            np.testing.assert_array_equal(slope, np.diff(np.vstack([np.zeros(6), partial_sums]), axis=0))
            assert (slope == 1.0).all() != switch


@pytest.mark.parametrize("nesting", ["cond-in-loop", "loop-in-cond", "loop-in-loop"])
def test_a_gradient_that_would_draw_a_nested_construct_s_numbers_again_is_refused(nesting: str) -> None:
    # Running such a construct again for its gradient draws other numbers (the loop's count moved
    # on): the gradient would be silently wrong, so it is an error naming the construct.
    rows = cc.placeholder("float64", (4, 6), name="rows")
    training = cc.placeholder("bool", (), name="training")

    def dropped(row: cc.Tensor) -> cc.Tensor:
        return cc.cond(training, lambda: cc.nn.dropout(row, rate=0.5), lambda: row)

    def scanned(x: cc.Tensor) -> cc.Tensor:
        return cc.scan(lambda total, row: total + cc.nn.dropout(row, rate=0.5), x, initializer=x[0] * 0.0)

    if nesting == "cond-in-loop":
        result = cc.scan(lambda total, row: total + dropped(row), rows, initializer=rows[0] * 0.0)
    elif nesting == "loop-in-cond":
        result = cc.cond(training, lambda: scanned(rows), lambda: rows)
    else:
        result = cc.scan(lambda total, row: total + scanned(cc.reshape(row, (2, 3)))[-1], rows,
                         initializer=cc.zeros((3,), "float64"))
    with pytest.raises(cc.NoGradientError, match="draws random numbers.*other numbers") as caught:
        cc.gradients(cc.reduce_sum(result), [rows])
    assert "test_control_flow.py" in str(caught.value)


def test_a_cond_in_a_cond_draws_the_same_numbers_for_its_gradient() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (8,), name="x")
        training = cc.placeholder("bool", (), name="training")
        inner = cc.cond(training, lambda: cc.cond(training, lambda: cc.nn.dropout(x, rate=0.5), lambda: x),
                        lambda: x)
        (slope,) = cc.gradients(cc.reduce_sum(inner), [x])
    with Session(graph) as sess:
        value, got = sess.run([inner, slope], {x: np.ones(8), training: True})
    np.testing.assert_array_equal(got, value)      # kept entries are 2 = their slope, dropped ones 0


@pytest.mark.parametrize("body", [lambda i: cc.add(i, 1), lambda i: [i + 1], lambda i: (i + 1,)],
                         ids=["tensor", "list", "tuple"])
def test_a_list_of_one_loop_variable_behaves_as_in_tf1(body) -> None:
    """TF1's own example: ``while_loop(c, b, [i])`` whose body returns ``i + 1`` alone gives the
    tensor (a list of it with ``return_same_structure``)."""
    graph = cc.Graph()
    with graph.as_default():
        i = cc.constant(0)
        final = cc.while_loop(lambda i: cc.less(i, 10), body, [i])
        kept = cc.while_loop(lambda i: cc.less(i, 10), body, [i], return_same_structure=True)
    assert isinstance(final, cc.Tensor) and isinstance(kept, list) and len(kept) == 1
    with Session(graph) as sess:
        assert sess.run(final) == 10 and sess.run(kept) == [10]


@pytest.mark.parametrize("construct", ["cond", "while_loop"])
def test_a_tensor_of_a_branch_or_loop_body_used_outside_it_is_an_error_at_its_line(construct: str) -> None:
    """It exists only while its function runs: used outside, it computed sqrt(-4) for a branch
    not taken (NaN) or raised a bare KeyError for a loop body's argument."""
    with cc.Graph().as_default():
        x = cc.placeholder("float32", (), name="x")
        inner = []

        def keep(value):
            inner.append(value)
            return value * 2.0
        if construct == "cond":
            cc.cond(x > 0.0, lambda: keep(cc.sqrt(x)), lambda: x)
        else:
            cc.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, keep(a)), (0, x))
        with pytest.raises(ValueError, match="was computed inside a cond branch or a loop body") as raised:
            inner[0] + 1.0
    assert f"(at {__file__}:" in str(raised.value)


def test_a_control_dependency_on_an_op_built_inside_a_branch_is_an_error_at_its_line() -> None:
    """TF1's trap: batch norm in a cond branch puts its update in UPDATE_OPS, and a control
    dependency on it from outside gave a misleading error about an assignment built before the cond."""
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float32", (4, 3), name="x")
        flag = cc.placeholder("bool", (), name="flag")
        cc.cond(flag, lambda: cc.layers.batch_normalization(x, training=True, name="bn"), lambda: x)
        updates = graph.get_collection(cc.GraphKeys.UPDATE_OPS)
        with pytest.raises(ValueError, match="was built inside a cond branch or a loop body") as raised:
            with cc.control_dependencies(updates):
                pass
    assert f"(at {__file__}:" in str(raised.value)


@pytest.mark.parametrize("target", ["cpu", "reference", "cuda-emulated"])
def test_map_fn_applies_fn_to_each_element_with_structures_and_a_gradient(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (3, 2), name="x")
        squares = cc.map_fn(lambda row: cc.reduce_sum(row * row), x)
        pairs = cc.map_fn(lambda e: {"twice": e[0] * 2.0, "shifted": e[1] + 1.0}, (x, x * 10.0))
        (gradient,) = cc.gradients(cc.reduce_sum(squares) + cc.reduce_sum(pairs["twice"]), [x])
        with pytest.raises(ValueError, match="map_fn: elems must be tensors with a first dimension"):
            cc.map_fn(lambda e: e, cc.constant(1.0))
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    with Session(graph, target=target) as sess:
        got_squares, got_pairs, got_gradient = sess.run([squares, pairs, gradient], {x: values})
    np.testing.assert_allclose(got_squares, (values ** 2).sum(axis=1))
    np.testing.assert_allclose(got_pairs["twice"], values * 2.0)
    np.testing.assert_allclose(got_pairs["shifted"], values * 10.0 + 1.0)
    np.testing.assert_allclose(got_gradient, 2.0 * values + 2.0)


@pytest.mark.parametrize("target", ["cpu", "reference", "cuda-emulated"])
@pytest.mark.parametrize("nesting, expected", [("cond", 6.0), ("while_loop", 10.0)])
def test_a_body_reads_what_a_construct_nested_in_it_assigned_in_the_same_iteration(
        target: str, nesting: str, expected: float) -> None:
    graph = cc.Graph()
    with graph.as_default():
        v = cc.Variable(np.array(0.0), name="v")

        def bump() -> cc.Tensor:
            with cc.control_dependencies([cc.assign_add(v, 1.0)]):
                return cc.constant(1.0, dtype="float64")

        def body(i, acc):
            if nesting == "cond":
                done = cc.cond(i >= 0, bump, lambda: cc.constant(0.0, dtype="float64"))
            else:   # i + 1 bumps: v is 1, 3, 6 and acc 1 + 3 + 6
                done = cc.while_loop(lambda j, d: j <= i, lambda j, d: (j + 1, bump()),
                                     (0, cc.constant(0.0, dtype="float64")))[1]
            with cc.control_dependencies([done]):
                return i + 1, acc + v * 1.0      # this iteration's value of v
        _, acc = cc.while_loop(lambda i, a: i < 3, body, (0, cc.constant(0.0, dtype="float64")))
    with Session(graph, target=target) as sess:
        got_acc, got_v = sess.run([acc, v])
    bumps = 3.0 if nesting == "cond" else 6.0
    assert (float(got_acc), float(got_v)) == (expected, bumps)


@pytest.mark.parametrize("construct", ["while_loop", "scan", "map_fn"])
def test_back_prop_false_stops_the_gradient_as_in_tf1(construct: str) -> None:
    xs = cc.placeholder("float64", shape=(3,), name="xs")
    if construct == "while_loop":
        y = cc.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * xs), (0, xs), back_prop=False)[1]
    elif construct == "scan":
        y = cc.scan(lambda a, e: a * e, xs, back_prop=False)
    else:
        y = cc.map_fn(lambda e: e * e, xs, back_prop=False)
    assert cc.gradients(cc.reduce_sum(y), [xs]) == [None]
    assert cc.gradients(cc.reduce_sum(y) + cc.reduce_sum(xs), [xs])[0] is not None
    with Session() as sess:   # the values are those of the loop with back_prop
        assert sess.run(y, {xs: np.array([1.0, 2.0, 3.0])}).shape == (3,)


@pytest.mark.parametrize("target", TARGETS)
def test_an_input_a_construct_s_result_does_not_depend_on_has_no_gradient(target: str) -> None:
    x = cc.placeholder("float64", shape=(2,), name="x")
    z = cc.placeholder("float64", shape=(2,), name="z")
    c = cc.placeholder("float64", shape=(2,), name="c")
    # q depends on z only; y on x, and on c through w after the first iteration.
    _, y, q, _ = cc.while_loop(lambda i, y, q, w: i < 2, lambda i, y, q, w: (i + 1, y * x + w, q + z, w + c),
                               (0, x, z, cc.zeros_like(x)))
    p = cc.placeholder("bool", shape=(), name="p")
    a, b = cc.cond(p, lambda: (x * 2.0, z * 3.0), lambda: (x, z + c))
    assert cc.gradients(y, [z]) == [None]
    assert cc.gradients(q, [x, c]) == [None, None]
    assert cc.gradients(a, [z, c]) == [None, None]
    dy_dx, dy_dc = cc.gradients(y, [x, c])
    db_dc, db_dz = cc.gradients(b, [c, z])
    with Session(target=target) as sess:
        feed = {x: np.array([2.0, 3.0]), z: np.ones(2), c: np.ones(2), p: False}
        got = sess.run([dy_dx, dy_dc, db_dc, db_dz], feed)
    # y = (x*x + 0)*x + c = x**3 + c: d/dx = 3x**2, d/dc = 1; b = z + c.
    np.testing.assert_allclose(got[0], 3.0 * np.array([2.0, 3.0]) ** 2)
    np.testing.assert_allclose(got[1], np.ones(2))
    np.testing.assert_allclose(got[2], np.ones(2))
    np.testing.assert_allclose(got[3], np.ones(2))


def test_cond_unpacks_one_result_unless_strict_as_in_tf1() -> None:
    x = cc.placeholder("float64", shape=(), name="x")
    single = cc.cond(x > 0.0, lambda: [x * 2.0], lambda: [x * 3.0])
    kept = cc.cond(x > 0.0, lambda: [x * 2.0], lambda: [x * 3.0], strict=True)
    assert isinstance(single, cc.Tensor)
    assert isinstance(kept, list) and len(kept) == 1
    with Session() as sess:
        assert sess.run([single, kept[0]], {x: -1.0}) == [-3.0, -3.0]


def test_while_loop_takes_tf1_s_positional_arguments() -> None:
    # TF1: (cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop, swap_memory, name,
    # maximum_iterations, return_same_structure)
    out = cc.while_loop(lambda i: i < 100, lambda i: i + 1, [0], None, 10, True, False, "counted", 5)
    assert out.name.startswith("counted")
    with Session() as sess:
        assert sess.run(out) == 5


def test_a_fori_loop_body_returning_another_structure_names_the_users_function() -> None:
    x = cc.placeholder("float32", shape=(3,), name="x")

    def my_body(i, v):
        return (v, v)
    line = my_body.__code__.co_firstlineno
    with pytest.raises(ValueError, match=rf"fori_loop: body_fun \(defined at .*test_control_flow.py:{line}\) "
                                         r"returns \(tensor, tensor\) but init_val is tensor"):
        cc.fori_loop(0, 3, my_body, x)


@pytest.mark.parametrize("target", TARGETS)
def test_foldl_and_foldr_reduce_in_order_with_structures_and_gradients(target: str) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    left = cc.foldl(lambda acc, e: acc * 10.0 + e, x)
    right = cc.foldr(lambda acc, e: acc * 10.0 + e, x)
    product = cc.foldl(lambda acc, e: acc * e, x, initializer=cc.constant(2.0, "float64"))
    pair = cc.foldr(lambda acc, e: (acc[0] + e, acc[1] * e), x,
                    initializer=(cc.constant(0.0, "float64"), cc.constant(1.0, "float64")))
    (grad,) = cc.gradients(left + right + product, [x])
    with Session(target=target) as sess:
        got = sess.run([left, right, product, pair, grad], {x: np.array([1.0, 2.0, 3.0])})
    assert got[:3] == [123.0, 321.0, 12.0]
    assert tuple(got[3]) == (6.0, 6.0)
    # d/dx of 100a + 10b + c, 100c + 10b + a and 2abc
    np.testing.assert_allclose(got[4], [113.0, 26.0, 105.0])


@pytest.mark.parametrize("construct", ["scan", "map_fn"])
def test_a_scan_or_map_fn_function_returning_none_is_an_error_naming_it(construct: str) -> None:
    x = cc.placeholder("float32", shape=(3,), name="x")

    def returns_nothing(*_):
        return None
    line = returns_nothing.__code__.co_firstlineno
    with pytest.raises(TypeError, match=rf"{construct}: fn \(defined at .*test_control_flow.py:{line}\) returned None"):
        if construct == "scan":
            cc.scan(returns_nothing, x, initializer=cc.constant(0.0))
        else:
            cc.map_fn(returns_nothing, x)


@pytest.mark.parametrize("target", TARGETS)
def test_scan_map_fn_and_foldl_carry_values_with_two_unknown_sizes(target: str) -> None:
    x = cc.placeholder("float32", (4, None, None), name="x")
    running = cc.scan(lambda h, r: h + r, x, initializer=cc.zeros_like(x[0]))
    doubled = cc.map_fn(lambda r: r * 2.0, x)
    total = cc.foldl(lambda acc, r: acc + r, x)
    empty = cc.placeholder("float32", (0, None, None), name="empty")
    none_run = cc.scan(lambda h, r: h + r, empty, initializer=cc.zeros_like(x[0]))
    values = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    with Session(target=target) as sess:
        got = sess.run([running, doubled, total, none_run], {x: values, empty: np.zeros((0, 2, 3), np.float32)})
    np.testing.assert_array_equal(got[0], np.cumsum(values, axis=0))
    np.testing.assert_array_equal(got[1], values * 2.0)
    np.testing.assert_array_equal(got[2], values.sum(axis=0))
    assert got[3].shape == (0, 2, 3)


@pytest.mark.parametrize("nesting", ["while-in-while", "while-in-cond", "scan-in-scan"])
def test_random_numbers_in_a_nested_loop_are_the_same_on_the_reference_target(nesting: str) -> None:
    """Each iteration of an inner loop draws new numbers; the reference target read the counter as
    the enclosing construct captured it and repeated the first iteration's numbers."""
    graph = cc.Graph()
    with graph.as_default():
        cc.set_random_seed(1)

        def inner() -> cc.Tensor:
            if nesting == "scan-in-scan":
                return cc.scan(lambda a, _: cc.random_uniform((2,), seed=5), cc.zeros((3, 1)),
                               initializer=cc.zeros((2,)))
            return cc.while_loop(lambda j, a: j < 3, lambda j, a: (j + 1, cc.concat(
                [a[1:], cc.expand_dims(cc.random_uniform((2,), seed=5), 0)], 0)), (0, cc.zeros((3, 2))))[1]
        if nesting == "while-in-while":
            rows = cc.while_loop(lambda i, b: i < 2, lambda i, b: (i + 1, cc.concat([b[3:], inner()], 0)),
                                 (0, cc.zeros((6, 2))))[1]
        elif nesting == "while-in-cond":
            rows = cc.cond(cc.constant(True), inner, lambda: cc.zeros((3, 2)))
        else:
            rows = cc.reshape(cc.scan(lambda a, _: cc.reshape(inner(), (6,)), cc.zeros((2, 1)),
                                      initializer=cc.zeros((6,))), (-1, 2))
    got = {}
    for target in ["cpu", "reference"]:
        with Session(graph, target=target) as sess:
            got[target] = sess.run(rows)
    assert len(np.unique(got["cpu"], axis=0)) == len(got["cpu"])
    np.testing.assert_allclose(got["reference"], got["cpu"], rtol=1e-6)


def test_map_fn_with_layers_makes_their_variables_once() -> None:
    """map_fn calls fn once to learn its results, then in the loop: a layer made in fn failed
    ('already exists') or, unnamed, made a second set of variables that the loop trained."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (4, 5), name="x")
        y = cc.map_fn(lambda row: cc.layers.dense(cc.layers.dense(cc.expand_dims(row, 0), 3, name="named"), 2), x)
        after = cc.layers.dense(x, 2)
        variables = cc.trainable_variables()
        names = [v.op.name for v in variables]
        assert names == ["named/kernel", "named/bias", "dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
        (grad,) = cc.gradients(cc.reduce_sum(y * y), [variables[0]])
    with Session(graph) as sess:
        rows = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
        got, got_grad, kernel, bias, out_kernel, out_bias = sess.run([y, grad] + variables[:4], {x: rows})
    expected = (rows @ kernel + bias) @ out_kernel + out_bias
    np.testing.assert_allclose(got.reshape(4, 2), expected, rtol=1e-5, atol=1e-6)
    assert np.any(got_grad != 0.0) and after.shape == (4, 2)


@pytest.mark.parametrize("target", TARGETS)
def test_case_runs_the_first_pair_that_holds_with_tf1_s_default_and_exclusive_checks(target: str) -> None:
    x = cc.placeholder("float64", (), name="x")
    pairs = [(x < 0.0, lambda: -x), (x < 1.0, lambda: x * x)]
    with_default = cc.case(pairs, default=lambda: 2.0 * x ** 3)
    without_default = cc.case(pairs)                      # the last pair's function is the default
    exclusive = cc.case([(x < 0.0, lambda: [x]), (x < 1.0, lambda: [x * x])], default=lambda: [x],
                        exclusive=True, strict=True)
    slope, = cc.gradients(with_default, [x])
    with Session(target=target) as sess:
        for value, expected, expected_slope in ((-2.0, 2.0, -1.0), (0.5, 0.25, 1.0), (3.0, 54.0, 54.0)):
            assert sess.run([with_default, slope], {x: value}) == [expected, expected_slope]
        assert sess.run(without_default, {x: 0.5}) == 0.25
        with pytest.raises(cc.InvalidArgumentError, match="case: none of the predicates holds and there is no "
                                                           r"default \(case at .*test_control_flow.py:\d+\)"):
            sess.run(without_default, {x: 3.0})
        assert sess.run(exclusive, {x: 0.5}) == [0.25]     # strict: the list of one stays a list
        with pytest.raises(cc.InvalidArgumentError, match="more than one predicate holds with exclusive=True"):
            sess.run(exclusive, {x: -1.0})


@pytest.mark.parametrize("target", TARGETS)
def test_switch_case_runs_one_branch_and_the_default_or_last_one_outside_the_indices(target: str) -> None:
    x = cc.placeholder("float64", (), name="x")
    k = cc.placeholder("int32", (), name="k")
    v = cc.Variable(0.0, dtype="float64", name="v")
    last_by_default = cc.switch_case(k, {1: lambda: x * 3.0, 0: lambda: x * x, 2: lambda: cc.assign_add(v, 1.0) + x})
    listed = cc.switch_case(k, [lambda: x * x, lambda: x * 3.0], default=lambda: -x)
    paired = cc.switch_case(k, [(1, lambda: x * 3.0), (0, lambda: x * x)])
    slope, = cc.gradients(listed, [x])
    with Session(target=target) as sess:
        assert [sess.run(last_by_default, {x: 2.0, k: i}) for i in (0, 1)] == [4.0, 6.0]
        assert sess.run(v) == 0.0                           # the third branch did not run
        assert [sess.run(last_by_default, {x: 2.0, k: i}) for i in (2, 7, -1)] == [3.0, 4.0, 5.0]
        assert [sess.run([listed, slope], {x: 2.0, k: i}) for i in (0, 1, 2, -5)] == [[4.0, 4.0], [6.0, 3.0],
                                                                                       [-2.0, -1.0], [-2.0, -1.0]]
        assert [sess.run(paired, {x: 2.0, k: i}) for i in (0, 1, 9)] == [4.0, 6.0, 6.0]


def test_case_and_switch_case_errors_name_the_argument_and_the_users_line() -> None:
    x = cc.placeholder("float32", (), name="x")
    k = cc.placeholder("int32", (), name="k")
    here = rf"test_control_flow.py:\d+"
    with pytest.raises(TypeError, match=rf"case: the predicate of pair 0, 'x\w*:0', must be a scalar bool, got "
                                        rf"float32 .*{here}"):
        cc.case([(x, lambda: x)])
    with pytest.raises(TypeError, match="case: the function of pair 1 must be callable"):
        cc.case([(x > 0.0, lambda: x), (x > 1.0, x)])
    with pytest.raises(TypeError, match=r"case: pred_fn_pairs\[0\] must be a \(predicate, callable\) pair"):
        cc.case([x > 0.0])
    with pytest.raises(ValueError, match="case: pred_fn_pairs is empty and there is no default"):
        cc.case([])
    with pytest.raises(TypeError, match=r"switch_case: branch_index 'x\w*:0' must be an integer scalar"):
        cc.switch_case(x, [lambda: x])
    with pytest.raises(ValueError, match=r"switch_case: the branch indices must be 0 to 1, each once, got \[0, 2\]"):
        cc.switch_case(k, [(0, lambda: x), (2, lambda: x)])
    with pytest.raises(TypeError, match=r"switch_case: the branch indices must be ints, got \[0, True\]"):
        cc.switch_case(k, [(0, lambda: x), (True, lambda: x)])
    with pytest.raises(TypeError, match="switch_case: default must be callable"):
        cc.switch_case(k, [lambda: x], default=x)
