"""``cc.nn.rnn_cell`` and ``cc.nn.dynamic_rnn``: each cell equals TF1's equations written in numpy,
variables are named as TF1's, sequence lengths stop the state, the gradient through time matches
finite differences, and dynamic, static and bidirectional runs agree on every target."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
from runtime import Session

BATCH, TIME, DEPTH, UNITS = 3, 4, 2, 5


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def _basic_rnn(x, h, c, kernel, bias, **_):
    h = np.tanh(np.concatenate([x, h], 1) @ kernel + bias)
    return h, h, c


def _gru(x, h, c, gates_kernel, gates_bias, candidate_kernel, candidate_bias, **_):
    r, u = np.split(_sigmoid(np.concatenate([x, h], 1) @ gates_kernel + gates_bias), 2, axis=1)
    candidate = np.tanh(np.concatenate([x, r * h], 1) @ candidate_kernel + candidate_bias)
    h = u * h + (1 - u) * candidate
    return h, h, c


def _lstm(x, h, c, kernel, bias, w_f_diag=None, w_i_diag=None, w_o_diag=None, projection=None, clip=None, **_):
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ kernel + bias, 4, axis=1)
    if w_f_diag is None:
        c = c * _sigmoid(f + 1.0) + _sigmoid(i) * np.tanh(j)
    else:
        c = c * _sigmoid(f + 1.0 + w_f_diag * c) + _sigmoid(i + w_i_diag * c) * np.tanh(j)
    if clip is not None:
        c = np.clip(c, -clip, clip)
    h = (_sigmoid(o + w_o_diag * c) if w_o_diag is not None else _sigmoid(o)) * np.tanh(c)
    if projection is not None:
        h = h @ projection
    return h, h, c


CELLS = {
    # name: (make the cell, numpy step, TF1's variable names under rnn/, state is an LSTM's)
    "basic_rnn": (lambda: cc.nn.rnn_cell.BasicRNNCell(UNITS), _basic_rnn,
                  ["basic_rnn_cell/kernel", "basic_rnn_cell/bias"], False),
    "gru": (lambda: cc.nn.rnn_cell.GRUCell(UNITS), _gru,
            ["gru_cell/gates/kernel", "gru_cell/gates/bias", "gru_cell/candidate/kernel", "gru_cell/candidate/bias"],
            False),
    "basic_lstm": (lambda: cc.nn.rnn_cell.BasicLSTMCell(UNITS), _lstm,
                   ["basic_lstm_cell/kernel", "basic_lstm_cell/bias"], True),
    "lstm-peepholes-projection-clip": (
        lambda: cc.nn.rnn_cell.LSTMCell(UNITS, use_peepholes=True, cell_clip=0.5, num_proj=3),
        lambda *args, **weights: _lstm(*args, clip=0.5, projection=weights.pop("projection/kernel"), **weights),
        ["lstm_cell/kernel", "lstm_cell/bias", "lstm_cell/w_f_diag", "lstm_cell/w_i_diag", "lstm_cell/w_o_diag",
         "lstm_cell/projection/kernel"], True),
}


def _numpy_rnn(step, weights: dict, x: np.ndarray, lengths: np.ndarray, state_size: tuple[int, int]):
    h = np.zeros((x.shape[0], state_size[1]))
    c = np.zeros((x.shape[0], state_size[0]))
    outputs = []
    for t in range(x.shape[1]):
        output, new_h, new_c = step(x[:, t], h, c, **weights)
        running = (t < lengths)[:, None]
        outputs.append(np.where(running, output, 0.0))
        h, c = np.where(running, new_h, h), np.where(running, new_c, c)
    return np.stack(outputs, 1), h, c


def _build(name: str, sequence_length: bool):
    make, _, names, is_lstm = CELLS[name]
    graph = cc.Graph()
    with graph.as_default():
        cc.set_random_seed(4)
        x = cc.placeholder("float64", (None, TIME, DEPTH), name="x")
        lengths = cc.placeholder("int32", (None,), name="lengths") if sequence_length else None
        outputs, state = cc.nn.dynamic_rnn(make(), x, sequence_length=lengths, dtype="float64")
        variables = cc.trainable_variables()
        assert [v.op.name for v in variables] == [f"rnn/{n}" for n in names]
        final = [state.c, state.h] if is_lstm else [state]
        loss = cc.reduce_sum(outputs * cc.constant(np.linspace(-1.0, 1.0, outputs.shape[2]))) + \
            sum(cc.reduce_sum(f * f) for f in final)
        grads = cc.gradients(loss, [x] + variables)
    return graph, x, lengths, outputs, final, loss, grads, variables


@pytest.mark.parametrize("sequence_length", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cells_equal_tf1s_equations_and_keep_the_state_past_each_length(name: str, sequence_length: bool) -> None:
    graph, x, lengths, outputs, final, loss, grads, variables = _build(name, sequence_length)
    rng = np.random.default_rng(5)
    xv = rng.normal(size=(BATCH, TIME, DEPTH))
    lv = np.array([4, 1, 3] if sequence_length else [TIME] * BATCH)
    feeds = {x: xv, **({lengths: lv.astype("int32")} if sequence_length else {})}
    # rnn/<cell>/gates/kernel -> gates_kernel, the numpy step's argument
    weights = {v.op.name.split("/", 2)[2].replace("gates/", "gates_").replace("candidate/", "candidate_"):
               v.initial_value for v in variables}
    sizes = (UNITS, 3) if "projection" in name else (UNITS, UNITS)
    expected_outputs, expected_h, expected_c = _numpy_rnn(CELLS[name][1], weights, xv, lv, sizes)
    for target in ("cpu", "reference", "cuda-emulated"):
        with Session(graph, target=target) as sess:
            got_outputs, *got_final = sess.run([outputs] + final, feeds)
        np.testing.assert_allclose(got_outputs, expected_outputs, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got_final[-1], expected_h, rtol=1e-10, atol=1e-12)
        if CELLS[name][3]:
            np.testing.assert_allclose(got_final[0], expected_c, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_the_gradient_through_time_matches_finite_differences(name: str) -> None:
    graph, x, lengths, outputs, final, loss, grads, variables = _build(name, True)
    rng = np.random.default_rng(6)
    feeds = {x: rng.normal(size=(BATCH, TIME, DEPTH)), lengths: np.array([4, 2, 3], "int32")}
    with Session(graph) as sess:
        analytic = sess.run(grads, feeds)
        for tensor, gradient in zip([x] + variables, analytic):
            base = feeds[tensor] if tensor is x else sess.run(tensor)
            for index in list(np.ndindex(base.shape))[:: max(1, base.size // 6)]:
                values = []
                for sign in (1.0, -1.0):
                    moved = base.copy()
                    moved[index] += sign * 1e-6
                    if tensor is x:
                        values.append(sess.run(loss, {**feeds, x: moved}))
                    else:
                        tensor.load(moved, sess)
                        values.append(sess.run(loss, feeds))
                        tensor.load(base, sess)
                numeric = (values[0] - values[1]) / 2e-6
                np.testing.assert_allclose(gradient[index], numeric, rtol=1e-5, atol=1e-7)


def test_static_dynamic_and_multi_layer_runs_agree_and_share_variables() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (None, TIME, DEPTH), name="x")
        cell = cc.nn.rnn_cell.MultiRNNCell([cc.nn.rnn_cell.GRUCell(UNITS), cc.nn.rnn_cell.BasicLSTMCell(3)])
        dynamic_outputs, dynamic_state = cc.nn.dynamic_rnn(cell, x, dtype="float64")
        static_outputs, static_state = cc.nn.static_rnn(cell, cc.unstack(x, axis=1), dtype="float64")
        names = [v.op.name for v in cc.trainable_variables()]
    assert names == ["rnn/multi_rnn_cell/cell_0/gru_cell/gates/kernel", "rnn/multi_rnn_cell/cell_0/gru_cell/gates/bias",
                     "rnn/multi_rnn_cell/cell_0/gru_cell/candidate/kernel",
                     "rnn/multi_rnn_cell/cell_0/gru_cell/candidate/bias",
                     "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/kernel", "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/bias"]
    feeds = {x: np.random.default_rng(7).normal(size=(2, TIME, DEPTH))}
    with Session(graph) as sess:
        dynamic, static = sess.run([dynamic_outputs, cc.stack(static_outputs, axis=1)], feeds)
        states = sess.run([dynamic_state[1].h, static_state[1].h, dynamic_state[0], static_state[0]], feeds)
    np.testing.assert_allclose(dynamic, static, rtol=1e-12)
    np.testing.assert_allclose(states[0], states[1], rtol=1e-12)
    np.testing.assert_allclose(states[2], states[3], rtol=1e-12)


def test_reverse_sequence_and_bidirectional_runs() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (None, TIME, DEPTH), name="x")
        lengths = cc.placeholder("int64", (None,), name="lengths")
        reversed_x = cc.nn.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
        time_major = cc.nn.reverse_sequence(cc.transpose(x, [1, 0, 2]), lengths, seq_axis=0, batch_axis=1)
        (forward, backward), (state_fw, state_bw) = cc.nn.bidirectional_dynamic_rnn(
            cc.nn.rnn_cell.GRUCell(UNITS), cc.nn.rnn_cell.GRUCell(UNITS), x, sequence_length=lengths, dtype="float64")
        assert {v.op.name.rsplit("/", 2)[0] for v in cc.trainable_variables()} == {"bidirectional_rnn/fw/gru_cell",
                                                                                  "bidirectional_rnn/bw/gru_cell"}
    xv = np.random.default_rng(8).normal(size=(3, TIME, DEPTH))
    lv = np.array([4, 2, 0])
    expected = xv.copy()
    for b, length in enumerate(lv):
        expected[b, :length] = xv[b, :length][::-1]
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            got, got_time_major, fw, bw, fw_state, bw_state = sess.run(
                [reversed_x, time_major, forward, backward, state_fw, state_bw], {x: xv, lengths: lv})
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(got_time_major, expected.transpose(1, 0, 2))
        assert fw.shape == bw.shape == (3, TIME, UNITS)
        np.testing.assert_array_equal(fw[2], 0.0)                      # a sequence of length 0
        np.testing.assert_array_equal(bw[1, 2:], 0.0)                  # past its length, in the inputs' order
        np.testing.assert_allclose(bw[1, 0], bw_state[1], rtol=1e-12)  # its last step is the first row
        np.testing.assert_allclose(fw[0, -1], fw_state[0], rtol=1e-12)


@pytest.mark.parametrize("make, error, message", [
    (lambda x: cc.nn.rnn_cell.GRUCell(0), ValueError, r"GRUCell: num_units must be a positive int, got 0"),
    (lambda x: cc.nn.dynamic_rnn(cc.nn.rnn_cell.GRUCell(2), x), ValueError,
     r"dynamic_rnn: give initial_state or dtype"),
    (lambda x: cc.nn.dynamic_rnn(cc.nn.rnn_cell.GRUCell(2), x[:, 0], dtype="float32"), ValueError,
     r"dynamic_rnn: the inputs must be \[batch, time, depth\]"),
    (lambda x: cc.nn.dynamic_rnn(cc.nn.rnn_cell.GRUCell(2), cc.placeholder("float32", (2, None, 3)),
                                 dtype="float32"), ValueError, r"the number of time steps .* must be known"),
    (lambda x: cc.nn.rnn_cell.BasicLSTMCell(2)(x[:, 0], (x[:, 0, :2],)), ValueError,
     r"BasicLSTMCell: the state has 1 parts but the cell's state_size LSTMStateTuple\(c=2, h=2\) has 2"),
    (lambda x: cc.nn.rnn_cell.BasicRNNCell(3)(x[:, 0], cc.zeros([2, 6])), ValueError,
     r"BasicRNNCell: state part 0 'Zeros\S*' must be \[batch, 3\] for inputs \(None, 3\), got \(2, 6\)"),
    (lambda x: cc.nn.dynamic_rnn(cc.nn.rnn_cell.GRUCell(3), x, initial_state=cc.zeros([2, 3, 1])), ValueError,
     r"GRUCell: state part 0 .* must be \[batch, 3\] for inputs \(None, 3\), got \(2, 3, 1\)"),
    (lambda x: cc.nn.dynamic_rnn(cc.nn.rnn_cell.GRUCell(2), x, sequence_length=[2.5, 1.0], dtype="float32"),
     TypeError, r"dynamic_rnn: sequence_length '\S*Const\S*' must be int32 or int64, got float32"),
    (lambda x: cc.nn.static_rnn(cc.nn.rnn_cell.GRUCell(2), [x[:, 0]], sequence_length=[[1, 2]], dtype="float32"),
     ValueError, r"static_rnn: sequence_length .* must be a vector of one length per sequence \(\[batch\]\), got "
                 r"shape \(1, 2\)"),
    (lambda x: cc.nn.static_rnn(cc.nn.rnn_cell.GRUCell(2), [cc.zeros([2, 3])], sequence_length=[1, 2, 3],
                                dtype="float32"),
     ValueError, r"static_rnn: sequence_length .* must be a vector of one length per sequence \(\[2\]\), got "
                 r"shape \(3,\)"),
    (lambda x: cc.nn.rnn_cell.BasicLSTMCell(2, state_is_tuple=False), ValueError, r"only state_is_tuple=True"),
])
def test_rnn_argument_errors_name_the_users_line(make, error, message) -> None:
    with cc.Graph().as_default() as graph, pytest.raises(error, match=message) as raised:
        make(cc.placeholder("float32", (None, 4, 3), name="x"))
    assert f"(at {__file__}:" in str(raised.value)
    assert not graph.get_collection(cc.GraphKeys.GLOBAL_VARIABLES)   # found before any variable is made


def test_reverse_sequence_moves_nan_and_inf_as_values_and_zero_steps_give_empty_outputs() -> None:
    """reverse_sequence was a product with a permutation matrix: 0 * inf made NaN of whole rows,
    padding included; dynamic_rnn over 0 steps failed in a reshape."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (None, 3), name="x")
        lengths = cc.placeholder("int64", (None,), name="lengths")
        reversed_x = cc.nn.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
        empty_inputs = cc.placeholder("float32", (None, 0, 2), name="empty")
        outputs, state = cc.nn.dynamic_rnn(cc.nn.rnn_cell.GRUCell(4), empty_inputs, dtype="float32")
    with Session(graph) as sess:
        got = sess.run(reversed_x, {x: np.array([[1.0, np.nan, 3.0], [4.0, 5.0, np.inf]]), lengths: [1, 2]})
        got_outputs, got_state = sess.run([outputs, state], {empty_inputs: np.zeros((3, 0, 2), "float32")})
    np.testing.assert_array_equal(got, [[1.0, np.nan, 3.0], [5.0, 4.0, np.inf]])
    assert got_outputs.shape == (3, 0, 4) and got_state.shape == (3, 4) and not got_state.any()


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_dropout_and_residual_wrappers_as_tf1(target: str) -> None:
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float64", (3, 4, 5), name="x")
        keep = cc.placeholder_with_default(np.float64(1.0), (), name="keep")
        cell = cc.nn.rnn_cell.DropoutWrapper(cc.nn.rnn_cell.LSTMCell(5), input_keep_prob=keep, output_keep_prob=keep,
                                             state_keep_prob=keep)
        outputs, state = cc.nn.dynamic_rnn(cell, x, dtype="float64", scope="dropped")
        plain, plain_state = cc.nn.dynamic_rnn(cc.nn.rnn_cell.ResidualWrapper(cc.nn.rnn_cell.LSTMCell(5)), x,
                                               dtype="float64", scope="residual")
        (slope,) = cc.gradients(cc.reduce_sum(outputs), [x])
    names = [v.op.name for v in cc.trainable_variables(graph)]
    assert names[:2] == ["dropped/lstm_cell/kernel", "dropped/lstm_cell/bias"]   # the cell's own names
    values = np.random.default_rng(0).normal(size=(3, 4, 5))
    with Session(graph, target=target) as sess:
        kept, kept_state, residual, residual_state, kept_slope = sess.run([outputs, state, plain, plain_state, slope],
                                                                           {x: values})
        dropped = sess.run(outputs, {x: values, keep: 0.5})
    assert np.isfinite(kept_slope).all() and np.isfinite(dropped).all()
    assert 0.2 < np.mean(dropped == 0.0) < 0.8 and np.mean(kept == 0.0) == 0.0
    np.testing.assert_allclose(kept[:, -1], kept_state.h, rtol=1e-12)
    # the residual cell's output is its LSTM's h plus the input
    np.testing.assert_allclose(residual[:, -1], residual_state.h + values[:, -1], rtol=1e-12)
    with pytest.raises(ValueError, match="DropoutWrapper: output_keep_prob must be in \\(0, 1\\]"):
        cc.nn.rnn_cell.DropoutWrapper(cc.nn.rnn_cell.GRUCell(2), output_keep_prob=1.5)


def test_dropout_wrapper_with_a_seed_draws_each_part_its_own_mask_as_tf1() -> None:
    # One seed for the wrapper: TF1 salts it per part ("input_0", "output_0", "state_0"...), so
    # the output's and the state's masks differ even where the cell's output is its state (GRU).
    R = cc.nn.rnn_cell
    x = cc.placeholder("float64", (256, 2, 3), name="x")
    cell = R.DropoutWrapper(R.GRUCell(8), output_keep_prob=0.5, state_keep_prob=0.5, seed=5)
    outputs, state = cc.nn.dynamic_rnn(cell, x, dtype="float64")
    assert cell._seed_for("output", 0) != cell._seed_for("state", 0)
    with Session() as sess:
        last, final = sess.run([outputs[:, -1], state], {x: np.random.default_rng(0).normal(size=(256, 2, 3))})
    kept_output, kept_state = last != 0.0, final != 0.0
    assert not np.array_equal(kept_output, kept_state)
    assert abs(kept_output.mean() - 0.5) < 0.05 and abs(kept_state.mean() - 0.5) < 0.05
