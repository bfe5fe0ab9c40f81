"""Batching-rule coverage over the whole API table (issue 21: "a missing batching rule is a test failure, never a
silent per-row loop"), on both engines.

tests/vmap_driver.py calls every op of the table (_api/table.py) that has a sample input, once under dyngrad.vmap
over a batch of rows, and checks the result against the explicit loop over the rows; it records whether the
fallback loop of _api/ops/vmap.py (`_loop`, which appends the key it runs for to vmap.FALLBACKS) did any of the
work. FALLS_BACK names the ops allowed to fall back, each with the reason; any other fallback fails, and so does an
entry that no longer falls back (the list stays true). NOT_BATCHED names the ops whose call under vmap raises or
disagrees with the loop today, with what goes wrong; it must stay exactly the set the driver sees.
"""
import pytest

from helpers import subprocess_env

FALLS_BACK = {
    'BoolTensor': 'no rule yet (the loop ran for __init__)',
    'F.affine_grid': 'no rule yet',
    'F.batch_norm': 'no rule yet',
    'F.cosine_embedding_loss': 'no rule yet',
    'F.ctc_loss': 'no rule yet',
    'F.dropout2d': 'no rule yet',
    'F.dropout3d': 'no rule yet',
    'F.embedding_bag': 'no rule yet',
    'F.fractional_max_pool2d': 'no rule yet',
    'F.fractional_max_pool2d_with_indices': 'no rule yet',
    'F.fractional_max_pool3d': 'no rule yet',
    'F.fractional_max_pool3d_with_indices': 'no rule yet',
    'F.gaussian_nll_loss': 'no rule yet',
    'F.grid_sample': 'no rule yet',
    'F.gumbel_softmax': 'no rule yet',
    'F.instance_norm': 'no rule yet',
    'F.linear_cross_entropy': 'no rule yet',
    'F.max_unpool1d': 'no rule yet',
    'F.max_unpool2d': 'no rule yet',
    'F.max_unpool3d': 'no rule yet',
    'F.multi_head_attention_forward': 'no rule yet',
    'F.multi_margin_loss': 'no rule yet',
    'F.multilabel_margin_loss': 'no rule yet',
    'F.multilabel_soft_margin_loss': 'no rule yet',
    'F.rrelu': 'no rule yet',
    'F.rrelu_': 'no rule yet',
    'F.scaled_dot_product_attention': 'no rule yet',
    'F.triplet_margin_loss': 'no rule yet',
    'F.triplet_margin_with_distance_loss': 'no rule yet',
    'LongTensor': 'no rule yet (the loop ran for __init__)',
    'addbmm': 'no rule yet',
    'addmm': 'no rule yet',
    'addmv': 'no rule yet',
    'addmv_': 'no rule yet',
    'addr': 'no rule yet',
    'arange': 'no rule yet',
    'argwhere': 'no rule yet',
    'as_strided': 'no rule yet',
    'as_strided_copy': 'no rule yet',
    'as_strided_scatter': 'no rule yet',
    'as_tensor': 'no rule yet',
    'asarray': 'no rule yet',
    'baddbmm': 'no rule yet',
    'bilinear': 'no rule yet',
    'binary_cross_entropy_with_logits': 'no rule yet',
    'bincount': 'no rule yet',
    'binomial': 'no rule yet',
    'block_diag': 'no rule yet',
    'bucketize': 'no rule yet',
    'cartesian_prod': 'no rule yet',
    'cdist': 'no rule yet',
    'cdouble': 'no rule yet',
    'cfloat': 'no rule yet',
    'chain_matmul': 'no rule yet',
    'cholesky_inverse': 'no rule yet',
    'combinations': 'no rule yet',
    'conv_tbc': 'no rule yet',
    'conv_transpose1d': 'no rule yet',
    'conv_transpose2d': 'no rule yet',
    'conv_transpose3d': 'no rule yet',
    'corrcoef': 'no rule yet',
    'cosine_embedding_loss': 'no rule yet',
    'cov': 'no rule yet',
    'cpu': 'no rule yet',
    'cross': 'no rule yet',
    'ctc_loss': 'no rule yet',
    'detach_': 'no rule yet (the loop ran for detach)',
    'diagonal_scatter': 'no rule yet',
    'dist': 'no rule yet',
    'dsplit': 'no rule yet',
    'einsum': 'no rule yet',
    'feature_alpha_dropout': 'no rule yet',
    'feature_alpha_dropout_': 'no rule yet',
    'fill': 'no rule yet',
    'from_dlpack': 'no rule yet',
    'gradient': 'no rule yet',
    'hinge_embedding_loss': 'no rule yet',
    'histc': 'no rule yet',
    'histogram': 'no rule yet',
    'histogramdd': 'no rule yet',
    'hsplit': 'no rule yet',
    'index_copy': 'no rule yet',
    'index_fill': 'no rule yet',
    'index_put': 'no rule yet',
    'index_put_': 'no rule yet',
    'index_reduce': 'no rule yet',
    'inner': 'no rule yet',
    'isin': 'no rule yet',
    'istft': 'no rule yet',
    'kl_div': 'no rule yet',
    'kron': 'no rule yet',
    'linalg.lstsq': 'no rule yet',
    'linalg.tensorinv': 'no rule yet',
    'linalg.tensorsolve': 'no rule yet',
    'linalg.vander': 'no rule yet',
    'lu': 'no rule yet',
    'lu_unpack': 'no rule yet',
    'margin_ranking_loss': 'no rule yet',
    'masked_scatter': 'no rule yet',
    'masked_select': 'no rule yet',
    'meshgrid': 'no rule yet',
    'multinomial': 'no rule yet',
    'new': 'no rule yet',
    'new_empty_strided': 'no rule yet',
    'nonzero': 'no rule yet',
    'nonzero_static': 'no rule yet',
    'normal': 'no rule yet',
    'one_hot': 'no rule yet',
    'pairwise_distance': 'no rule yet',
    'pca_lowrank': 'no rule yet',
    'pdist': 'no rule yet',
    'pixel_unshuffle': 'no rule yet',
    'poisson': 'no rule yet',
    'poisson_nll_loss': 'no rule yet',
    'prelu': 'no rule yet',
    'randint_like': 'no rule yet',
    'renorm': 'no rule yet',
    'repeat_interleave': 'no rule yet',
    'resize_as_': 'no rule yet',
    'rrelu': 'no rule yet',
    'rrelu_': 'no rule yet',
    'scalar_tensor': 'no rule yet',
    'scatter_reduce': 'no rule yet',
    'searchsorted': 'no rule yet',
    'select_scatter': 'no rule yet',
    'stft': 'no rule yet',
    'sum_to_size': 'no rule yet',
    'svd_lowrank': 'no rule yet',
    'take_along_dim': 'no rule yet',
    'tensor': 'no rule yet',
    'tensordot': 'no rule yet',
    'to_dense': 'no rule yet',
    'triplet_margin_loss': 'no rule yet',
    'unfold': 'no rule yet',
    'unfold_copy': 'no rule yet',
    'unique': 'no rule yet',
    'unique_consecutive': 'no rule yet',
    'unravel_index': 'no rule yet',
    'vander': 'no rule yet',
    'vsplit': 'no rule yet',
}
NOT_BATCHED = {
    'DoubleTensor': 'output 0: values differ from the loop (max |diff| 0.1)',
    'Size': 'TypeError: tuple expected at most 1 argument, got 2',
    'Tensor': 'output 0: values differ from the loop (max |diff| 0.1)',
    '__deepcopy__': 'AttributeError: __deepcopy__',
    '__iand__': 'AttributeError: __iand__',
    '__ifloordiv__': 'AttributeError: __ifloordiv__',
    '__ilshift__': 'AttributeError: __ilshift__',
    '__imod__': 'AttributeError: __imod__',
    '__ior__': 'AttributeError: __ior__',
    '__irshift__': 'AttributeError: __irshift__',
    '__ixor__': 'AttributeError: __ixor__',
    '__rdiv__': 'AttributeError: __rdiv__',
    '__rlshift__': 'AttributeError: __rlshift__',
    '__rrshift__': 'AttributeError: __rrshift__',
    'aminmax': 'TypeError: aminmax: expected an int as dim, got tuple.',
    'apply_': 'RuntimeError: vmap: in-place apply_ has no out-of-place twin to batch; use an ou',
    'as_strided_': 'RuntimeError: copy_: shapes (3, 2, 3) and (3, 2, 2) cannot be broadcast: dimensi',
    'batch_norm': 'output 0: values differ from the loop (max |diff| 0.21049206088141326)',
    'fill_diagonal_': 'RuntimeError: vmap: in-place fill_diagonal_ has no out-of-place twin to batch; u',
    'instance_norm': 'output 0: values differ from the loop (max |diff| 0.07199119616304395)',
    'map2_': 'RuntimeError: vmap: in-place map2_ has no out-of-place twin to batch; use an out',
    'map_': 'RuntimeError: vmap: in-place map_ has no out-of-place twin to batch; use an out-',
    'masked.log_softmax': 'TypeError: this Tensor was never initialised (Tensor.__new__ without Tensor.__in',
    'masked.logaddexp': 'TypeError: this Tensor was never initialised (Tensor.__new__ without Tensor.__in',
    'masked.median': 'ValueError: The truth value of an array with more than one element is ambiguous.',
    'masked.norm': 'TypeError: this Tensor was never initialised (Tensor.__new__ without Tensor.__in',
    'masked.normalize': 'TypeError: this Tensor was never initialised (Tensor.__new__ without Tensor.__in',
    'masked.softmax': 'TypeError: this Tensor was never initialised (Tensor.__new__ without Tensor.__in',
    'masked.softmin': 'TypeError: this Tensor was never initialised (Tensor.__new__ without Tensor.__in',
    'prod': 'TypeError: prod: expected an int as dim, got tuple.',
    'range': 'RuntimeError: range: upper bound and step are inconsistent (start=0.55, end=0.5,',
    'resize_': 'RuntimeError: vmap: in-place resize_ has no out-of-place twin to batch; use an o',
    'swapaxes_': 'RuntimeError: copy_: shapes (3, 2, 3) and (3, 3, 2) cannot be broadcast: dimensi',
    'swapdims_': 'RuntimeError: copy_: shapes (3, 2, 3) and (3, 3, 2) cannot be broadcast: dimensi',
    't_': 'RuntimeError: copy_: shapes (3, 2, 3) and (3, 3, 2) cannot be broadcast: dimensi',
    'transpose_': 'RuntimeError: copy_: shapes (3, 2, 3) and (3, 3, 2) cannot be broadcast: dimensi',
    'unsqueeze_': 'RuntimeError: copy_: shapes (3, 2, 3) and (3, 2, 1, 3) cannot be broadcast: dime',
    'where': '3 outputs under vmap, 2 per row',
}


_REPORTS = {}


def _report(dg):
    if dg.__name__ not in _REPORTS:
        import json
        import os
        import subprocess
        import sys
        import tempfile
        driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vmap_driver.py")
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "vmap.json")
            done = subprocess.run([sys.executable, driver, "--engine", dg.__name__, "--report", path],
                                  env=subprocess_env(), timeout=900, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr[-3000:]
            with open(path, encoding="utf-8") as f:
                _REPORTS[dg.__name__] = json.load(f)
    return _REPORTS[dg.__name__]


def _with(report, *statuses):
    return {k: v for k, v in report.items() if v["status"] in statuses}


def test_the_driver_reaches_the_table(dg):
    report = _report(dg)
    assert len(report) > 700, f"only {len(report)} ops of the table were run under vmap"
    # the count sees both outcomes: a rule (sum, matmul) and the fallback (an op listed as falling back)
    assert report["sum"]["status"] == "rule" and report["matmul"]["status"] == "rule"
    assert any(v["status"] == "fallback" for v in report.values()) == bool(FALLS_BACK)


def test_only_the_listed_ops_fall_back(dg):
    fell = _with(_report(dg), "fallback")
    extra = {k: v["how"] for k, v in fell.items() if k not in FALLS_BACK}
    assert not extra, f"these ops ran through the fallback loop, with no batching rule: {extra}"


def test_every_listed_op_still_falls_back(dg):
    report = _report(dg)
    stale = {k: report.get(k, {}).get("status", "not run") for k in FALLS_BACK
             if report.get(k, {}).get("status") != "fallback"}
    assert not stale, f"FALLS_BACK lists ops that no longer fall back (remove them): {stale}"


def test_batched_values_match_the_loop(dg):
    report = _report(dg)
    bad = {k: v["status"] + ": " + v["error"] for k, v in _with(report, "error", "mismatch").items()
           if k not in NOT_BATCHED}
    assert not bad, f"under vmap these ops raise or disagree with the loop over the rows: {bad}"
    stale = sorted(k for k in NOT_BATCHED if report.get(k, {}).get("status") not in ("error", "mismatch"))
    assert not stale, f"NOT_BATCHED lists ops that now batch (remove them): {stale}"


def test_both_engines_agree():
    import dyngrad
    import dyngrad.reference
    a, b = _report(dyngrad), _report(dyngrad.reference)
    differ = {k: (a.get(k, {}).get("status"), b.get(k, {}).get("status")) for k in set(a) | set(b)
              if a.get(k, {}).get("status") != b.get(k, {}).get("status")}
    assert not differ, f"the engines batch these ops differently (C++, reference): {differ}"


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_follows_randomness(dg, name):
    """'error' refuses the draw; 'same' gives equal rows on equal inputs; 'different' draws each row's own mask
    (per channel for the feature variant), each value being the kept input's affine image or the dropped value."""
    import numpy as np
    F = dg.nn.functional
    op = getattr(F, name)
    x = dg.tensor(np.random.default_rng(1).uniform(0.5, 1.5, (4, 6, 8, 3)))
    rows = x[:1].expand(4, 6, 8, 3).contiguous()
    with pytest.raises(RuntimeError, match="randomness"):
        dg.vmap(lambda r: op(r, 0.5, True))(x)
    same = dg.vmap(lambda r: op(r, 0.5, True), randomness="same")(rows).numpy()
    assert all(np.array_equal(same[0], same[k]) for k in range(1, 4))
    diff = dg.vmap(lambda r: op(r, 0.5, True), randomness="different")(rows).numpy()
    assert not all(np.array_equal(diff[0], diff[k]) for k in range(1, 4))
    for out in (same, diff):
        alpha = -1.7580993408473766
        a = (0.5 * (1 + alpha * alpha * 0.5)) ** -0.5
        b = -a * alpha * 0.5
        kept = np.isclose(out, a * rows.numpy() + b)
        dropped = np.isclose(out, a * alpha + b)
        assert (kept | dropped).all() and kept.any() and dropped.any()
        if name == "feature_alpha_dropout":            # one decision per (row, sample, channel)
            assert (kept.all(axis=3) | dropped.all(axis=3)).all()
    inplace = rows.clone()
    got = dg.vmap(lambda r: op(r, 0.5, True, True), randomness="same")(inplace)
    assert np.array_equal(got.numpy()[0], got.numpy()[1])
