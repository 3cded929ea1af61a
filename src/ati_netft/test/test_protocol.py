"""Net F/T wire formats: requests, records, calibration, units, status, sequences."""

from __future__ import annotations

import struct

from ati_netft.protocol import (
    Calibration,
    Command,
    Plausibility,
    ProtocolError,
    RdtRecord,
    RdtStream,
    SequenceTracker,
    Verdict,
    calibration_xml,
    decode_status,
    pack_calibration_response,
    pack_records,
    pack_request,
    parse_calibration_response,
    parse_calibration_xml,
    parse_datagram,
    parse_request,
)
import pytest


def test_request_is_eight_big_endian_bytes() -> None:
    assert pack_request(Command.START_REALTIME) == bytes.fromhex('1234000200000000')
    assert pack_request(Command.SET_SOFTWARE_BIAS, 5) == bytes.fromhex('1234004200000005')
    assert parse_request(bytes.fromhex('1234000300000064')) == (Command.START_BUFFERED, 100)
    with pytest.raises(ProtocolError, match='header'):
        parse_request(bytes.fromhex('4321000200000000'))
    with pytest.raises(ProtocolError, match='unknown RDT command'):
        parse_request(bytes.fromhex('1234007700000000'))


def test_records_round_trip_and_buffered_datagrams_hold_several() -> None:
    records = [RdtRecord(7 + i, 70 + i, 0, (1, -2, 3, -4, 5, -6)) for i in range(3)]
    data = pack_records(records)
    assert len(data) == 3 * 36
    assert data[:12] == struct.pack('>III', 7, 70, 0)
    assert parse_datagram(data) == records
    with pytest.raises(ProtocolError, match='36-byte records'):
        parse_datagram(data[:50])


def test_counts_convert_to_si_whatever_the_configured_units() -> None:
    # N and N.mm (common): 1e6 counts per N, 1e6 counts per N.mm.
    cal = Calibration(1_000_000, 1_000_000, 'N', 'N-mm')
    assert cal.to_si((2_000_000, 0, 0, 3_000_000, 0, 0)) == pytest.approx((2, 0, 0, 0.003, 0, 0))
    lbf = Calibration(1000, 1000, 'lbf', 'lbf-in')
    wrench = lbf.to_si((1000, 0, 0, 0, 0, 1000))
    assert wrench[0] == pytest.approx(4.44822, rel=1e-5)
    assert wrench[5] == pytest.approx(0.112985, rel=1e-5)
    assert cal.to_counts(cal.to_si((12, -34, 56, 78, -90, 12))) == (12, -34, 56, 78, -90, 12)
    with pytest.raises(ProtocolError, match='unknown torque unit'):
        Calibration(1, 1, 'N', 'furlong-stone')


def test_calibration_over_tcp_and_xml_round_trips() -> None:
    cal = Calibration(1_000_000, 1_000, 'N', 'N-mm', 1000.0)
    data = pack_calibration_response(cal)
    assert len(data) == 24 and data[:4] == bytes.fromhex('12340204')
    back = parse_calibration_response(data)
    assert (back.counts_per_force, back.counts_per_torque, back.torque_unit) == (1e6, 1e3, 'N-mm')
    parsed = parse_calibration_xml(calibration_xml(cal))
    assert parsed == cal
    # Unit spellings as sensors write them.
    xml = '<cfgcpf>1000000</cfgcpf><cfgcpt>1000</cfgcpt><scfgfu>N</scfgfu><scfgtu>Nmm</scfgtu>'
    assert parse_calibration_xml(xml).newton_metre_per_count == pytest.approx(1e-6)
    with pytest.raises(ProtocolError, match='no <cfgcpt>'):
        parse_calibration_xml('<cfgcpf>1</cfgcpf>')


def test_status_bits_are_named() -> None:
    assert decode_status(0) == []
    names = decode_status((1 << 31) | (1 << 6) | (1 << 20))
    assert names == ['bad active calibration', 'bit 20', 'error (summary)']


def test_sequence_tracker_counts_loss_reordering_and_wrap() -> None:
    t = SequenceTracker()
    assert t.update(1) == Verdict.HELD  # the first record waits for the second
    for s in (2, 3, 6, 7):  # 4 and 5 lost
        assert t.update(s) == (Verdict.CONFIRMED if s == 2 else Verdict.NEW)
    assert t.lost == 2
    assert t.update(5) == Verdict.LATE  # out of order, and not lost after all
    assert (t.lost, t.out_of_order) == (1, 1)
    w = SequenceTracker()
    w.update(2**32 - 2)
    w.update(2**32 - 1)
    assert w.update(0) == Verdict.NEW and w.lost == 0  # wraps without a gap


def test_a_duplicated_record_does_not_take_back_a_loss() -> None:
    # A late record that was never missing (a duplicate of one already used, as a switch
    # may send) took one off the loss count: 4 was lost, and lost read 0.
    t = SequenceTracker()
    for s in (1, 2, 3, 5, 6):
        t.update(s)
    assert t.lost == 1
    assert t.update(3) == Verdict.LATE
    assert (t.lost, t.out_of_order) == (1, 1)
    assert t.update(4) == Verdict.LATE and t.lost == 0  # the missing one, late
    assert t.update(4) == Verdict.LATE and t.lost == 0  # and again: no further


def test_a_bad_first_record_is_not_a_dropout() -> None:
    t = SequenceTracker()
    assert t.update(0) == Verdict.HELD  # e.g. a zeroed record before the stream
    assert [t.update(s) for s in (5000, 5001)] == [Verdict.HELD, Verdict.CONFIRMED]
    assert (t.lost, t.unconfirmed, t.resyncs) == (0, 1, 0)


def test_a_restarted_sequence_is_followed_after_one_record_and_counted_once() -> None:
    t = SequenceTracker()
    for s in range(1, 5001):
        t.update(s)
    assert [t.update(s) for s in (1, 2, 3)] == [Verdict.HELD, Verdict.CONFIRMED, Verdict.NEW]
    assert (t.resyncs, t.lost, t.out_of_order, t.last_resync) == (1, 0, 0, (5000, 1))
    # A restart within the first records of the old stream: older by less than max_late,
    # so late for a while, never for more than max_late records.
    u = SequenceTracker()
    for s in range(1, 41):
        u.update(s)
    verdicts = [u.update(s) for s in range(1, 60)]
    assert verdicts.count(Verdict.LATE) == 40 and verdicts[-1] == Verdict.NEW


def test_one_record_far_off_is_held_and_dropped_when_the_stream_goes_on() -> None:
    t = SequenceTracker()
    for s in range(1, 1001):
        t.update(s)
    assert t.update(1000 + 2**30) == Verdict.HELD
    assert t.update(1001) == Verdict.NEW  # no stall
    assert t.update(5) == Verdict.HELD  # far behind: a jump too, not 995 late records
    assert t.update(1002) == Verdict.NEW
    assert (t.lost, t.out_of_order, t.resyncs, t.unconfirmed) == (0, 0, 0, 2)


def test_a_dropout_is_confirmed_and_counted_as_loss() -> None:
    t = SequenceTracker()
    for s in range(1, 11):
        t.update(s)
    assert [t.update(s) for s in (1011, 1012)] == [Verdict.HELD, Verdict.CONFIRMED]
    assert (t.lost, t.resyncs) == (1000, 0)


def test_a_late_buffered_datagram_is_late_not_a_restart() -> None:
    t = SequenceTracker()
    for s in range(1, 41):
        t.update(s)
    for s in range(81, 121):  # datagram 3 before datagram 2
        t.update(s)
    assert all(t.update(s) == Verdict.LATE for s in range(41, 81))
    assert (t.lost, t.out_of_order, t.resyncs) == (0, 40, 0)


def test_plausibility_bounds_come_from_the_rating_or_explicit_limits() -> None:
    cal = Calibration(1_000_000, 1_000, 'N', 'N-mm', 1000.0, (100, 100, 200, 5000, 5000, 5000))
    p = Plausibility.of(cal)
    assert p.max_counts == (
        400_000_000,
        400_000_000,
        800_000_000,
        20_000_000,
        20_000_000,
        20_000_000,
    )
    assert p.problem(RdtRecord(1, 1, 0, (400_000_000, 0, 0, 0, 0, 0))) is None
    assert 'Fx' in p.problem(RdtRecord(1, 1, 0, (400_000_001, 0, 0, 0, 0, 0)))  # type: ignore[operator]
    assert 'reserved' in p.problem(RdtRecord(1, 1, 1 << 20, (0,) * 6))  # type: ignore[operator]
    assert p.problem(RdtRecord(1, 1, (1 << 31) | (1 << 5), (0,) * 6)) is None  # real errors
    explicit = Plausibility.of(cal, max_force_n=10.0, max_torque_nm=1.0)
    assert explicit.max_counts == (10_000_000,) * 3 + (1_000_000,) * 3
    unknown = Plausibility.of(Calibration(1_000_000, 1_000_000))  # no rating: no bound
    assert unknown.problem(RdtRecord(1, 1, 0, (2**31 - 1,) * 6)) is None
    # The rating travels with the XML page, not with READCALINFO.
    assert parse_calibration_xml(calibration_xml(cal)).max_rating == cal.max_rating
    assert parse_calibration_response(pack_calibration_response(cal)).max_rating == ()


def test_the_stream_uses_good_records_and_counts_the_rest() -> None:
    stream = RdtStream(Plausibility((1000,) * 6))
    good = [RdtRecord(s, s, 0, (s - 900, 0, 0, 0, 0, 0)) for s in range(1001, 1011)]
    assert stream.feed(pack_records(good[:1])) == []  # the first waits for the second
    assert stream.feed(pack_records(good[1:5])) == good[:5]
    assert stream.feed(b'\x00' * 50) == [] and stream.malformed == 1
    bad = RdtRecord(1006, 6, 0, (5000, 0, 0, 0, 0, 0))
    assert stream.feed(pack_records([bad])) == [] and stream.implausible == 1
    assert 'beyond' in stream.last_problem
    assert stream.feed(pack_records(good[5:])) == good[5:]
    assert stream.tracker.lost == 0
    # After a restart the held first record is used with the one that confirms it.
    restart = [RdtRecord(s, s, 0, (0,) * 6) for s in (1, 2, 3)]
    assert stream.feed(pack_records(restart[:1])) == []
    assert stream.feed(pack_records(restart[1:])) == restart
