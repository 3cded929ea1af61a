"""The identification bench: its loss-against-simulations figure, an interrupt, its seeds,
and the pushes it adds over the table's edge."""

from __future__ import annotations

from pathlib import Path
import warnings

import numpy as np
import pytest

from slide_bringup.bench.identification import draw_losses
from slide_core.geometry import cell_positions


def test_the_figure_draws_runs_that_start_after_the_first_simulations(tmp_path: Path):
    # A method's trace starts at its first improvement: before it no run has a loss, and
    # the figure leaves those points out instead of averaging nothing.
    curves = {
        'a': [([30, 300], [2.0, 1.0], 1.0), ([50, 900], [3.0, 1.5], 1.0)],
        'b': [([], [], 1.0)],
    }
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        path = draw_losses(tmp_path / 'loss.png', curves)
    assert path.stat().st_size > 1000


def test_a_loss_picture_that_fails_half_way_leaves_nothing(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # It was drawn straight onto its path, after making the folders for it.
    from matplotlib.figure import Figure

    def fails(self, fname, **kwargs):  # type: ignore[no-untyped-def]
        Path(fname).write_bytes(b'\x89PNG half')
        raise OSError('disk full')

    monkeypatch.setattr(Figure, 'savefig', fails)
    curves = {'analytic': [([1, 10], [2.0, 1.0], 1.0)]}
    with pytest.raises(OSError, match='disk full'):
        draw_losses(tmp_path / 'new' / 'losses.png', curves)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_keeps_the_objects_identified(tmp_path: Path) -> None:
    # Every object done was lost with a Ctrl-C or a SIGTERM (up to 4 minutes of them).
    from slide_bringup.bench import identification
    from slide_bringup.signals import Terminated

    def stop_at_the_second(message: str) -> None:
        if message.startswith('box'):
            raise Terminated('SIGTERM')

    result = identification.run(
        ['snack', 'box'], ['analytic'], png=tmp_path / 'loss.png', progress=stop_at_the_second
    )
    assert result['interrupted'] == 'terminated'
    assert result['objects_planned'] == ['snack', 'box']
    assert result['objects'] == ['snack']
    figures = result['methods']['analytic']
    assert figures['add_error_m'] > 0
    assert figures['within_10pct_runs'] == 1
    assert figures['simulations_to_within_10pct'] is not None
    assert result['edge_balance']['poses'] == 0  # the probabilistic extras were not run
    assert Path(result['png']).stat().st_size > 1000


def test_seeds_identify_each_object_from_new_pushes(tmp_path: Path) -> None:
    from slide_bringup.bench import identification

    said: list[str] = []
    result = identification.run(['snack'], ['analytic'], seed=3, seeds=2, progress=said.append)
    assert result['seeds'] == [3, 4] and result['runs'] == 2
    assert result['objects'] == ['snack']
    fits = [line for line in said if 'analytic: add' in line]
    assert [line.split(':')[0] for line in fits] == ['seed 3', 'seed 4']
    # Two draws of pushes, two fits: not one fit counted twice.
    assert fits[0].split(': ', 1)[1] != fits[1].split(': ', 1)[1]
    # Each seed's figures, and their mean as the bench's.
    per = [result['per_seed'][s]['add_error_m']['analytic'] for s in ('3', '4')]
    assert per[0] != per[1]
    assert result['methods']['analytic']['add_error_m'] == pytest.approx(np.mean(per))
    with pytest.raises(ValueError, match='seeds must be at least 1'):
        identification.run(['snack'], ['analytic'], seeds=0)


def test_the_pushes_over_the_edge_start_with_the_object_sticking_out(tmp_path: Path) -> None:
    from slide_bringup.bench import identification
    from slide_core.identification import TrainingSet
    from slide_core.model import load_object, load_workcell

    spec, cell = load_object('box'), load_workcell()
    pushes = identification.edge_pushes(spec, cell, 0, tmp_path, np.random.default_rng(0))
    expected = identification.EDGE_STARTS * identification.EDGE_PUSHES
    assert [pd.index for pd in pushes] == list(range(10, 10 + expected))
    train = TrainingSet.from_pushes(
        spec.grid, pushes, 'rigid', cell.fingertip.force_heights(spec.grid)
    )
    assert train.supported is not None and train.over_edge.mean() > 0.1
    # The first step of each start has about EDGE_SHARE of the cells past the edge.
    starts = [pd.X_steps[0] for pd in pushes[:: identification.EDGE_PUSHES]]
    for X in starts:
        x_WC = cell_positions(spec.grid, X)[:, 0]
        assert 0.1 < np.mean(x_WC < 0.0) < 0.3


def test_the_tracked_pose_figures_come_from_the_tracking_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slide_bringup.bench import identification
    from slide_sim.tracker import Tracking

    recorded = []
    record = identification._record

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        recorded.append(args[4] if len(args) > 4 else kwargs.get('tracking'))
        return record(*args, **kwargs)

    monkeypatch.setattr(identification, '_record', spy)
    camera = Tracking.of(10.0, 0.5, 0.2, (2.0, -1.0))
    result = identification.run(['box'], ['probabilistic'], seed=1, tracking=camera)
    # The bench's own pushes with the true poses, then the same pushes through the camera.
    assert recorded[:2] == [None, camera]
    tracked = result['tracked_poses']
    assert (tracked['hz'], tracked['sigma_m']) == (10.0, 0.0005)
    assert (
        tracked['probabilistic_add_error_m'] != result['methods']['probabilistic']['add_error_m']
    )
    assert tracked['truth_in_support_fraction'] in (0.0, 1.0)
    # The camera's offset, as the fingertip's contacts measure it, and the fit without it.
    assert tracked['offset_m'] == [0.002, -0.001]
    assert tracked['contact_offset_m'] == pytest.approx([-0.002, 0.001], abs=5e-4)
    assert tracked['contact_offset_spread_m'] == 0.0  # one object, one draw
    assert tracked['calibrated_add_error_m'] > 0.0
    assert tracked['calibrated_add_error_m'] != tracked['probabilistic_add_error_m']
