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
    'BoolTensor': "a constructor or conversion that reads the row's values as data; no rule yet",
    'F.affine_grid': 'no rule yet (nn.functional)',
    'F.batch_norm': 'no rule yet (nn.functional)',
    'F.cosine_embedding_loss': 'no rule yet (nn.functional)',
    'F.ctc_loss': 'no rule yet (nn.functional)',
    'F.dropout2d': "the sample's 2-D row is not dropout2d/3d's shape (torch warns); the loop keeps its per-row reading",
    'F.dropout3d': "the sample's 2-D row is not dropout2d/3d's shape (torch warns); the loop keeps its per-row reading",
    'F.embedding_bag': 'no rule yet (nn.functional)',
    'F.fractional_max_pool2d': 'no rule yet (nn.functional)',
    'F.fractional_max_pool2d_with_indices': 'no rule yet (nn.functional)',
    'F.fractional_max_pool3d': 'no rule yet (nn.functional)',
    'F.fractional_max_pool3d_with_indices': 'no rule yet (nn.functional)',
    'F.gaussian_nll_loss': 'no rule yet (nn.functional)',
    'F.grid_sample': 'no rule yet (nn.functional)',
    'F.gumbel_softmax': "random draws: randomness='different' runs them per row; no batched rule yet",
    'F.instance_norm': 'no rule yet (nn.functional)',
    'F.linear_cross_entropy': 'no rule yet (nn.functional)',
    'F.max_unpool1d': 'no rule yet (nn.functional)',
    'F.max_unpool2d': 'no rule yet (nn.functional)',
    'F.max_unpool3d': 'no rule yet (nn.functional)',
    'F.multi_head_attention_forward': 'no rule yet (nn.functional)',
    'F.multi_margin_loss': 'no rule yet (nn.functional)',
    'F.multilabel_margin_loss': 'no rule yet (nn.functional)',
    'F.multilabel_soft_margin_loss': 'no rule yet (nn.functional)',
    'F.rrelu': "random draws: randomness='different' runs them per row; no batched rule yet",
    'F.rrelu_': "random draws: randomness='different' runs them per row; no batched rule yet",
    'F.triplet_margin_loss': 'no rule yet (nn.functional)',
    'F.triplet_margin_with_distance_loss': 'no rule yet (nn.functional)',
    'LongTensor': "a constructor or conversion that reads the row's values as data; no rule yet",
    'addbmm': 'no rule yet (products and combinations of several operands)',
    'addmm': 'no rule yet (products and combinations of several operands)',
    'addmv': 'no rule yet (products and combinations of several operands)',
    'addmv_': 'no rule yet (products and combinations of several operands)',
    'addr': 'no rule yet (products and combinations of several operands)',
    'arange': "a constructor or conversion that reads the row's values as data; no rule yet",
    'argwhere': "data-dependent result shape; the loop stacks rows that agree (torch refuses)",
    'as_strided': "strides name the physical memory, which a row does not own",
    'as_strided_copy': "strides name the physical memory, which a row does not own",
    'as_strided_scatter': "strides name the physical memory, which a row does not own",
    'as_tensor': "a constructor or conversion that reads the row's values as data; no rule yet",
    'asarray': "a constructor or conversion that reads the row's values as data; no rule yet",
    'baddbmm': 'no rule yet (products and combinations of several operands)',
    'bilinear': 'no rule yet (nn.functional)',
    'binary_cross_entropy_with_logits': 'no rule yet (nn.functional)',
    'bincount': "data-dependent result shape; the loop stacks rows that agree (torch refuses)",
    'binomial': "random draws: randomness='different' runs them per row; no batched rule yet",
    'block_diag': 'no rule yet (products and combinations of several operands)',
    'cartesian_prod': 'no rule yet (products and combinations of several operands)',
    'cdist': 'no rule yet (products and combinations of several operands)',
    'chain_matmul': 'no rule yet (products and combinations of several operands)',
    'cholesky_inverse': 'no rule yet (linalg outside the (*, n, n) family)',
    'combinations': 'no rule yet (products and combinations of several operands)',
    'conv_tbc': 'no rule yet (nn.functional)',
    'conv_transpose1d': 'no rule yet (nn.functional)',
    'conv_transpose2d': 'no rule yet (nn.functional)',
    'conv_transpose3d': 'no rule yet (nn.functional)',
    'corrcoef': 'no rule yet (products and combinations of several operands)',
    'cosine_embedding_loss': 'no rule yet (nn.functional)',
    'cov': 'no rule yet (products and combinations of several operands)',
    'cpu': "a constructor or conversion that reads the row's values as data; no rule yet",
    'cross': 'no rule yet (products and combinations of several operands)',
    'ctc_loss': 'no rule yet (nn.functional)',
    'detach_': 'in-place detach of a batched row; no rule yet',
    'diagonal_scatter': 'no rule yet (indexing, scatter and split composites)',
    'dist': 'no rule yet (products and combinations of several operands)',
    'dsplit': 'no rule yet (indexing, scatter and split composites)',
    'einsum': 'no rule yet (products and combinations of several operands)',
    'feature_alpha_dropout': "the sample (p=0, train a tensor) reads train's truth value per row",
    'feature_alpha_dropout_': "the sample (p=0, train a tensor) reads train's truth value per row",
    'fill': "a constructor or conversion that reads the row's values as data; no rule yet",
    'from_dlpack': "a constructor or conversion that reads the row's values as data; no rule yet",
    'gradient': 'no rule yet (indexing, scatter and split composites)',
    'hinge_embedding_loss': 'no rule yet (nn.functional)',
    'histc': "reads the row's values to size or place its result; no rule yet",
    'histogram': "data-dependent result shape; the loop stacks rows that agree (torch refuses)",
    'histogramdd': "data-dependent result shape; the loop stacks rows that agree (torch refuses)",
    'hsplit': 'no rule yet (indexing, scatter and split composites)',
    'index_copy': 'no rule yet (indexing, scatter and split composites)',
    'index_fill': 'no rule yet (indexing, scatter and split composites)',
    'index_put': 'no rule yet (indexing, scatter and split composites)',
    'index_put_': 'no rule yet (indexing, scatter and split composites)',
    'index_reduce': 'no rule yet (indexing, scatter and split composites)',
    'inner': 'no rule yet (products and combinations of several operands)',
    'istft': 'no rule yet (nn.functional)',
    'kl_div': 'no rule yet (nn.functional)',
    'kron': 'no rule yet (products and combinations of several operands)',
    'linalg.lstsq': 'no rule yet (linalg outside the (*, n, n) family)',
    'linalg.tensorinv': 'no rule yet (linalg outside the (*, n, n) family)',
    'linalg.tensorsolve': 'no rule yet (linalg outside the (*, n, n) family)',
    'linalg.vander': 'no rule yet (linalg outside the (*, n, n) family)',
    'lu': 'no rule yet (linalg outside the (*, n, n) family)',
    'lu_unpack': 'no rule yet (linalg outside the (*, n, n) family)',
    'margin_ranking_loss': 'no rule yet (nn.functional)',
    'masked_scatter': 'no rule yet (indexing, scatter and split composites)',
    'masked_select': "data-dependent result shape; the loop stacks rows that agree (torch refuses)",
    'meshgrid': 'no rule yet (products and combinations of several operands)',
    'multinomial': "random draws: randomness='different' runs them per row; no batched rule yet",
    'new': "a constructor or conversion that reads the row's values as data; no rule yet",
    'new_empty_strided': "strides name the physical memory, which a row does not own",
    'nonzero': "data-dependent result shape; the loop stacks rows that agree (torch refuses)",
    'nonzero_static': "reads the row's values to size or place its result; no rule yet",
    'normal': "random draws: randomness='different' runs them per row; no batched rule yet",
    'one_hot': "reads the row's values to size or place its result; no rule yet",
    'pairwise_distance': 'no rule yet (products and combinations of several operands)',
    'pca_lowrank': 'no rule yet (linalg outside the (*, n, n) family)',
    'pdist': 'no rule yet (products and combinations of several operands)',
    'pixel_unshuffle': 'no rule yet (nn.functional)',
    'poisson': "random draws: randomness='different' runs them per row; no batched rule yet",
    'poisson_nll_loss': 'no rule yet (nn.functional)',
    'prelu': 'no rule yet (nn.functional)',
    'randint_like': "random draws: randomness='different' runs them per row; no batched rule yet",
    'renorm': 'no rule yet (indexing, scatter and split composites)',
    'repeat_interleave': 'no rule yet (indexing, scatter and split composites)',
    'resize_as_': "strides name the physical memory, which a row does not own",
    'rrelu': "random draws: randomness='different' runs them per row; no batched rule yet",
    'rrelu_': "random draws: randomness='different' runs them per row; no batched rule yet",
    'scalar_tensor': "a constructor or conversion that reads the row's values as data; no rule yet",
    'scatter_reduce': 'no rule yet (indexing, scatter and split composites)',
    'searchsorted': 'no rule yet (indexing, scatter and split composites)',
    'select_scatter': 'no rule yet (indexing, scatter and split composites)',
    'stft': 'no rule yet (nn.functional)',
    'sum_to_size': 'no rule yet (indexing, scatter and split composites)',
    'svd_lowrank': 'no rule yet (linalg outside the (*, n, n) family)',
    'take_along_dim': 'no rule yet (indexing, scatter and split composites)',
    'tensor': "a constructor or conversion that reads the row's values as data; no rule yet",
    'tensordot': 'no rule yet (products and combinations of several operands)',
    'to_dense': "a constructor or conversion that reads the row's values as data; no rule yet",
    'triplet_margin_loss': 'no rule yet (nn.functional)',
    'unfold': 'no rule yet (nn.functional)',
    'unfold_copy': 'no rule yet (nn.functional)',
    'unique': "data-dependent result shape; the loop stacks rows that agree (torch refuses)",
    'unique_consecutive': "data-dependent result shape; the loop stacks rows that agree (torch refuses)",
    'unravel_index': 'no rule yet (indexing, scatter and split composites)',
    'vander': 'no rule yet (linalg outside the (*, n, n) family)',
    'vsplit': 'no rule yet (indexing, scatter and split composites)',
    'where': "data-dependent result shape; the loop stacks rows that agree (torch refuses)",
    'masked.log_softmax': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.logaddexp': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.median': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.norm': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.normalize': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.softmax': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.softmin': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.amax': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.amin': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.argmax': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.argmin': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.cumprod': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.cumsum': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.logsumexp': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.mean': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.prod': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.std': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.sum': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
    'masked.var': 'masked.* reach the core with the mask (batched or not): the dispatch wrapper loops, no masked rules yet',
}
NOT_BATCHED = {
    'DoubleTensor': 'bug: legacy constructor on a batched row copies the physical data',
    'Size': 'not an op: Size(tensor) reads values (the sample is a constructor call)',
    'Tensor': 'bug: legacy constructor on a batched row copies the physical data',
    'apply_': 'runs a Python callable per element: no out-of-place twin to batch (the error says so)',
    'batch_norm': "weight and running_mean are one tensor here: a row's stat update moves the next's weight",
    'instance_norm': "weight and running_mean are one tensor here: a row's stat update moves the next's weight",
    'map2_': 'runs a Python callable per element: no out-of-place twin to batch (the error says so)',
    'map_': 'runs a Python callable per element: no out-of-place twin to batch (the error says so)',
    'range': "reads the row's values as bounds (data-dependent; torch refuses)",
    'resize_': 'resizes storage, which a row does not own (the error says so)',
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
