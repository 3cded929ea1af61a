"""Net F/T wire formats: requests, records, calibration, units, status, sequences."""

from __future__ import annotations

import struct

from ati_netft.protocol import (
    Calibration,
    Command,
    ProtocolError,
    RdtRecord,
    SequenceTracker,
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
    for s in (1, 2, 3, 6, 7):  # 4 and 5 lost
        assert t.update(s)
    assert t.lost == 2
    assert not t.update(5)  # 5 arrives late: out of order, and not lost after all
    assert (t.lost, t.out_of_order) == (1, 1)
    w = SequenceTracker()
    w.update(2**32 - 1)
    assert w.update(0) and w.lost == 0  # wraps without a gap
