"""Each ASTFProgram instruction compiles to the expected IR command; bad arguments fail
with the field and the line of the call."""

from __future__ import annotations

import inspect

import pytest
from helpers import buffers, commands, profile_of

from squall.astf import ASTFCmdDelay, ASTFProgram, ProfileError


def lineno() -> int:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def compile_pair(c: ASTFProgram, s: ASTFProgram) -> dict:
    return profile_of(c, s).to_json()


def test_send_recv_watermarks_are_cumulative(validate) -> None:
    c = ASTFProgram()
    c.send(b"abc")
    c.send("déf")  # str is UTF-8 encoded
    c.recv(10)
    c.recv(5)
    s = ASTFProgram()
    s.recv(3 + len("déf".encode()))
    s.send(b"x" * 15)
    ir = compile_pair(c, s)
    validate(ir)
    cmds = commands(ir)
    bufs = buffers(ir)
    assert [x["op"] for x in cmds] == ["send", "send", "recv", "recv"]
    assert bufs[cmds[0]["buf"]]["text"] == "abc"
    assert bufs[cmds[1]["buf"]]["text"] == "déf"
    assert cmds[2] == {"op": "recv", "bytes": 10}
    assert cmds[3] == {"op": "recv", "bytes": 15}


def test_recv_clear_restarts_the_count() -> None:
    c = ASTFProgram()
    c.set_var("n", 3)
    c.set_label("top")
    c.send(b"q")
    c.recv(100, clear=True)
    c.recv(7, clear=True)
    c.jmp_nz("n", "top")
    s = ASTFProgram()
    s.recv(1)
    s.send(b"a", size=107)
    ir = compile_pair(c, s)
    cmds = commands(ir)
    assert cmds[3] == {"op": "recv", "bytes": 100, "clear": True}
    assert cmds[4] == {"op": "recv", "bytes": 7, "clear": True}


def test_send_with_size_and_fill_and_binary(validate) -> None:
    c = ASTFProgram()
    c.send(b"\x00\x01\xff")
    c.recv(1000)
    s = ASTFProgram()
    s.recv(3)
    s.send(b"HDR", size=1000, fill=b"z")
    ir = compile_pair(c, s)
    validate(ir)
    bufs = buffers(ir)
    b0 = bufs[commands(ir)[0]["buf"]]
    assert b0 == {"name": b0["name"], "base64": "AAH/"}
    srv = commands(ir, ir["templates"][0]["server_program"])
    b1 = bufs[srv[1]["buf"]]
    assert b1["text"] == "HDR" and b1["size"] == 1000 and b1["fill"] == {"text": "z"}


def test_identical_payloads_share_one_buffer() -> None:
    c = ASTFProgram()
    c.send(b"same")
    c.send(b"same")
    c.recv(4)
    s = ASTFProgram()
    s.recv(8)
    s.send(b"same")
    ir = compile_pair(c, s)
    assert len(ir["buffers"]) == 1


def test_every_tcp_control_instruction(validate) -> None:
    c = ASTFProgram()
    c.connect()
    c.set_send_blocking(False)
    c.send(b"hi")
    c.delay(250)
    c.delay_rand(10, 20.4)
    c.recv(2)
    c.reset()
    s = ASTFProgram()
    s.accept()
    s.recv(2)
    s.send(b"ok")
    s.wait_for_peer_close()
    ir = compile_pair(c, s)
    validate(ir)
    cmds = commands(ir)
    assert cmds[0] == {"op": "connect"}
    assert cmds[1] == {"op": "set_send_blocking", "block": False}
    assert cmds[3] == {"op": "delay", "usec": 250}
    assert cmds[4] == {"op": "delay_rand", "min_usec": 10, "max_usec": 20}
    assert cmds[6] == {"op": "reset"}
    srv = commands(ir, ir["templates"][0]["server_program"])
    assert srv[0] == {"op": "accept"} and srv[-1] == {"op": "wait_for_peer_close"}


def test_close_instruction() -> None:
    c = ASTFProgram()
    c.send(b"x")
    c.close()
    s = ASTFProgram()
    s.recv(1)
    ir = compile_pair(c, s)
    assert commands(ir)[-1] == {"op": "close"}


def test_vars_labels_and_tick_loops(validate) -> None:
    c = ASTFProgram()
    c.set_var("a", 5)
    c.set_tick_var("t")
    c.set_label("loop:")
    c.send(b"x")
    c.recv(1, clear=True)
    c.jmp_nz("a", "loop:")
    c.jmp_dp("t", "loop:", 2.5)
    s = ASTFProgram()
    s.set_tick_var("t0")
    s.set_label("l")
    s.recv(1, clear=True)
    s.send(b"y")
    s.jmp_dp("t0", "l", 3)
    ir = compile_pair(c, s)
    validate(ir)
    cmds = commands(ir)
    assert cmds[0] == {"op": "set_var", "id": 0, "val": 5}
    assert cmds[1] == {"op": "set_tick_var", "id": 1}
    assert cmds[2] == {"op": "set_label", "label": "loop:"}
    assert cmds[5] == {"op": "jmp_nz", "id": 0, "label": "loop:"}
    assert cmds[6] == {"op": "jmp_dp", "id": 1, "label": "loop:", "duration_usec": 2500000}


def test_label_outside_the_name_alphabet_is_renamed() -> None:
    c = ASTFProgram()
    c.set_var("v", 2)
    c.set_label("my label!")
    c.send(b"x")
    c.jmp_nz("v", "my label!")
    s = ASTFProgram()
    s.recv(1)
    cmds = commands(compile_pair(c, s))
    assert cmds[1]["label"] == cmds[3]["label"] == "label0"


def test_udp_instructions(validate) -> None:
    c = ASTFProgram(stream=False)
    c.set_keepalive_msg(1500, rx_mode=True)
    c.send_msg(b"query")
    c.recv_msg(1)
    c.send_msg(b"query2")
    c.recv_msg(1)
    c.close_msg()
    s = ASTFProgram(stream=False)
    s.recv_msg(1)
    s.send_msg(b"answer")
    s.recv_msg(1)
    s.send_msg(b"answer")
    ir = compile_pair(c, s)
    validate(ir)
    assert ir["templates"][0]["transport"] == "udp"
    cmds = commands(ir)
    assert cmds[0] == {"op": "set_keepalive_msg", "msec": 1500, "rx_mode": True}
    assert cmds[2] == {"op": "recv_msg", "count": 1}
    assert cmds[4] == {"op": "recv_msg", "count": 2}
    assert cmds[5] == {"op": "close"}


def test_send_chunk_splits_with_delays() -> None:
    c = ASTFProgram()
    c.send_chunk(b"abcdefg", 3, 100)
    s = ASTFProgram()
    s.recv(7)
    ir = compile_pair(c, s)
    cmds = commands(ir)
    bufs = buffers(ir)
    assert [x["op"] for x in cmds] == ["send", "delay"] * 3
    assert [bufs[x["buf"]]["text"] for x in cmds if x["op"] == "send"] == ["abc", "def", "g"]


def test_commands_list_and_cmd_objects() -> None:
    p = ASTFProgram(commands=[ASTFCmdDelay(40)])
    p.send(b"x")
    s = ASTFProgram()
    s.recv(1)
    assert commands(compile_pair(p, s))[0] == {"op": "delay", "usec": 40}


def test_trex_command_objects_make_the_same_program() -> None:
    """TRex's `ASTFProgram(commands=[...])` form: each command object is the method's
    instruction; receive objects take the watermark itself (TRex's methods accumulate into
    it); a UDP command makes a UDP program."""
    from squall.astf import (ASTFCmdConnect, ASTFCmdNoClose, ASTFCmdRecv, ASTFCmdRecvMsg,
                             ASTFCmdReset, ASTFCmdSend, ASTFCmdTxMode, ASTFCmdTxPkt,
                             ASTFCmdKeepaliveMsg, ASTFCmdCloseMsg)
    by_cmds = ASTFProgram(commands=[ASTFCmdConnect(), ASTFCmdTxMode(1), ASTFCmdSend(b"GET"),
                                    ASTFCmdRecv(5), ASTFCmdRecv(9), ASTFCmdNoClose()])
    by_calls = ASTFProgram()
    by_calls.connect()
    by_calls.set_send_blocking(False)
    by_calls.send(b"GET")
    by_calls.recv(5)
    by_calls.recv(4)
    by_calls.wait_for_peer_close()
    s = ASTFProgram()
    s.recv(3)
    s.send(b"x" * 9)
    assert commands(compile_pair(by_cmds, s)) == commands(compile_pair(by_calls, s))
    u = ASTFProgram(commands=[ASTFCmdKeepaliveMsg(500), ASTFCmdTxPkt(b"q"), ASTFCmdRecvMsg(1),
                              ASTFCmdCloseMsg()])
    assert not u.stream
    assert [i.op for i in u.instrs] == ["set_keepalive_msg", "send_msg", "recv_msg", "close"]
    assert [i.op for i in ASTFProgram(commands=ASTFCmdReset()).instrs] == ["reset"]
    with pytest.raises(ProfileError) as ei:
        ASTFCmdRecv(0)
    assert ei.value.field == "min_bytes" and ei.value.filename == __file__


# ---- errors name the field and the user's line ------------------------------------------

def test_udp_instruction_in_tcp_program_points_at_the_call() -> None:
    p = ASTFProgram()
    with pytest.raises(ProfileError) as ei:
        line = lineno(); p.send_msg(b"x")  # noqa: E702
    assert ei.value.lineno == line and ei.value.filename == __file__
    assert "stream=False" in str(ei.value) and str(ei.value).startswith(f"{__file__}:{line}:")


def test_undefined_label_reported_at_the_jump_line_when_compiling() -> None:
    c = ASTFProgram()
    c.set_var("v", 1)
    line = lineno(); c.jmp_nz("v", "nowhere")  # noqa: E702
    s = ASTFProgram()
    with pytest.raises(ProfileError) as ei:
        profile_of(c, s).to_json()
    assert ei.value.lineno == line and ei.value.field == "label"


def test_undefined_variable_and_too_many_variables() -> None:
    c = ASTFProgram()
    c.set_label("a")
    line = lineno(); c.jmp_nz("ghost", "a")  # noqa: E702
    with pytest.raises(ProfileError) as ei:
        profile_of(c, ASTFProgram()).to_json()
    assert ei.value.lineno == line and "ghost" in ei.value.msg
    p = ASTFProgram()
    for v in "abcd":
        p.set_var(v, 1)
    with pytest.raises(ProfileError) as ei2:
        line = lineno(); p.set_var("e", 1)  # noqa: E702
    assert ei2.value.lineno == line and ei2.value.field == "var_id"


@pytest.mark.parametrize("call,field", [
    (lambda p: p.delay(-1), "usec"),
    (lambda p: p.delay("5"), "usec"),
    (lambda p: p.delay(float("nan")), "usec"),
    (lambda p: p.delay(float("inf")), "usec"),
    (lambda p: p.delay_rand(10, 5), "min_usec"),
    (lambda p: p.recv(-3), "bytes"),
    (lambda p: p.set_var("v", 2**32), "val"),
    (lambda p: p.send(123), "buf"),
    (lambda p: p.send(b""), "buf"),
    (lambda p: p.set_send_blocking(1), "block"),
    (lambda p: p.jmp_dp("t", "l", 0), "duration"),
    (lambda p: p.jmp_dp("t", "l", float("nan")), "duration"),
    (lambda p: p.jmp_dp("t", "l", float("inf")), "duration"),
])
def test_bad_arguments_name_the_field(call, field) -> None:
    p = ASTFProgram()
    p.set_tick_var("t")
    with pytest.raises(ProfileError) as ei:
        call(p)
    assert ei.value.field == field
    assert ei.value.filename == __file__


def test_duplicate_label_and_bad_side() -> None:
    p = ASTFProgram()
    p.set_label("x")
    with pytest.raises(ProfileError, match="defined already"):
        p.set_label("x")
    with pytest.raises(ProfileError) as ei:
        ASTFProgram(side="x")
    assert ei.value.field == "side"


def test_datagram_size_limit() -> None:
    p = ASTFProgram(stream=False)
    with pytest.raises(ProfileError, match="65507"):
        p.send_msg(b"x", size=70000)


def loop_start(n: int, label: str, stream: bool = True) -> ASTFProgram:
    """A program about to run a loop of `n` rounds back to `label` (variable "n")."""
    p = ASTFProgram(stream=stream)
    p.set_var("n", n)
    p.set_label(label)
    return p


def test_loops_that_never_wait_or_keep_a_watermark_fail_at_their_line(validate) -> None:
    """The engine's loop rules, reported at the profile's line: a loop must wait (a counted
    loop of send_msg is a burst, a zero delay is no wait), and its last recv must clear."""
    c = loop_start(3, "top")
    c.delay(0)
    jump = lineno() + 1
    c.jmp_nz("n", "top")
    s = ASTFProgram()
    s.recv(1)
    with pytest.raises(ProfileError, match="never waits") as ei:
        compile_pair(c, s)
    assert ei.value.site is not None and ei.value.site.lineno == jump
    c = loop_start(3, "top")
    c.send(b"q")
    last = lineno() + 1
    c.recv(10)
    c.jmp_nz("n", "top")
    with pytest.raises(ProfileError, match="needs clear=True") as ei:
        compile_pair(c, s)
    assert ei.value.site is not None and ei.value.site.lineno == last
    # Accepted (as the engine does): the same loop with clear, a counted burst of datagrams.
    c = loop_start(3, "top")
    c.send(b"q")
    c.recv(10, clear=True)
    c.jmp_nz("n", "top")
    s = loop_start(3, "top")
    s.recv(1, clear=True)
    s.send(b"0123456789")
    s.jmp_nz("n", "top")
    validate(compile_pair(c, s))
    u = loop_start(5, "burst", stream=False)
    u.send_msg(b"x")
    u.jmp_nz("n", "burst")
    v = ASTFProgram(stream=False)
    v.recv_msg(5)
    validate(profile_of(u, v).to_json())


def test_a_receive_of_nothing_is_refused_at_its_line() -> None:
    """recv(0) / recv_msg(0) wait for nothing: the engine's watermarks must rise."""
    c = ASTFProgram()
    c.recv(5)
    with pytest.raises(ProfileError, match="waits for nothing") as ei:
        line = lineno(); c.recv(0)  # noqa: E702
    assert ei.value.lineno == line and ei.value.field == "bytes"
    u = ASTFProgram(stream=False)
    u.recv_msg(1)
    with pytest.raises(ProfileError, match="waits for nothing") as ei:
        line = lineno(); u.recv_msg(0)  # noqa: E702
    assert ei.value.lineno == line and ei.value.field == "pkts"


def test_sends_after_close_do_not_count() -> None:
    """close ends the program: a send after it never happens, so a peer waiting for its
    bytes would hang (the engine's loader refuses it the same way)."""
    c = ASTFProgram()
    c.close()
    c.send(b"x")
    s = ASTFProgram()
    s.recv(1)
    with pytest.raises(ProfileError, match="would hang"):
        compile_pair(c, s)
