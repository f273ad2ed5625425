import json
import multiprocessing
import zlib
from pathlib import Path

from dispatch.adapterkit import HOLD_SPAN, InstanceBook, decode_instance, encode_instance


def test_the_cores_instances_encode_exactly() -> None:
    assert encode_instance("h0000002a") == 42
    assert decode_instance(42) == "h0000002a"
    assert decode_instance(encode_instance("hffffffff")) == "hffffffff"


def test_other_instances_encode_through_crc32_within_the_span() -> None:
    code = encode_instance("supervisor-7")
    assert code == zlib.crc32(b"supervisor-7")
    assert 0 <= code < HOLD_SPAN


def test_out_of_range_numbers_encode_no_hold() -> None:
    assert decode_instance(-1) is None
    assert decode_instance(HOLD_SPAN) is None


def test_book_in_memory_names_what_it_placed() -> None:
    book = InstanceBook()
    code = book.remember("supervisor-7")
    assert book.name(code) == "supervisor-7"
    assert book.name(5) == "h00000005"
    assert book.name(HOLD_SPAN + 1) is None


def _remember(path: str, instance: str) -> None:
    InstanceBook(path).remember(instance)


def test_book_on_disk_is_read_by_another_process(tmp_path: Path) -> None:
    path = str(tmp_path / "state" / "holds.json")
    procs = [multiprocessing.Process(target=_remember, args=(path, f"inst-{i}")) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    fresh = InstanceBook(path)
    for i in range(4):
        assert fresh.name(encode_instance(f"inst-{i}")) == f"inst-{i}"
    assert len(json.loads(Path(path).read_text())) == 4


def test_canonical_instances_are_not_written(tmp_path: Path) -> None:
    path = tmp_path / "holds.json"
    InstanceBook(path).remember("h00000009")
    assert not path.exists()


def test_an_unreadable_book_falls_back_to_the_canonical_form(tmp_path: Path) -> None:
    path = tmp_path / "holds.json"
    path.write_text("{not json")
    code = encode_instance("mine")
    assert InstanceBook(path).name(code) == decode_instance(code)
