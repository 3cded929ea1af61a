"""The physics benchmark: recorded fingertip pushes replayed (the 88-cell book), and the
true maps predicting the twin."""

from __future__ import annotations

from slide_bringup.bench.physics import replay, twin_true_maps


def test_a_recorded_push_replays_without_the_general_qp() -> None:
    messages: list[str] = []
    result = replay(messages.append, pushes=1, repeats=1)
    assert result['replay_pushes'] == 1 and result['replay_object'] == 'book (88 cells)'
    assert result['replay_steps_per_push'] > 50
    assert result['replay_general_qp_fraction'] == 0.0
    assert result['replay_s_per_push'] > 0.0
    assert any('replaying' in m for m in messages)


def test_the_true_maps_predict_the_twin_under_each_support_model() -> None:
    messages: list[str] = []
    result = twin_true_maps(messages.append, pushes=2, objects=['hammer'])
    assert result['twin_true_maps_pushes'] == 2 and result['twin_true_maps_support'] == 'rigid'
    rigid, cell_mass = (result[f'twin_true_maps_add_error_m_{k}'] for k in ('rigid', 'cell_mass'))
    # Measured: 1.5 mm and 21 mm (the hammer's heavy head does not press only under itself).
    assert 0.0 < rigid < 0.005
    assert cell_mass > 2 * rigid
    assert result['twin_true_maps_add_error_m'] == rigid
    assert 0.0 < result['twin_true_maps_add_error_m_no_push_moment'] < 0.005
    assert any('hammer' in m for m in messages)
