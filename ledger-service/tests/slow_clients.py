"""Slow, stalled and malformed clients, with raw sockets, against a running server: what an
outsider without a token can send. Shared by tests/test_serve_slow_clients.py (asserts on
`durable-ledger serve`) and `make bench` (the same probes on every candidate server).

Each probe returns plain data (no asserts), so the bench can tabulate what a server did."""

import json
import os
import socket
import time

import requests

BEGIN = b"POST /v1/operations/begin HTTP/1.1\r\nHost: x\r\n"
AUTH = b"Authorization: Bearer runner-token\r\nContent-Type: application/json\r\n"

# Request heads that never finish, or whose body never comes: what each one must not do is hold
# a thread of the server (or anything a normal request needs) while it waits.
STALLS = {
    "idle": b"",
    "partial_head": b"P",
    "partial_header_line": BEGIN + b"Authorization: Bearer runner-to",
    # python-requests puts Content-Length before Content-Type: the length is not the last line
    "stalled_body_length_first": BEGIN + b"Content-Length: 5000\r\n" + AUTH + b"\r\n{\"job_id\": ",
    "stalled_body_length_last": BEGIN + AUTH + b"Content-Length: 5000\r\n\r\n{\"job_id\": ",
    "stalled_chunked_body": BEGIN + AUTH + b"Transfer-Encoding: chunked\r\n\r\n20\r\n{\"job_id\": ",
    "expect_100_no_body": BEGIN + AUTH + b"Content-Length: 50\r\nExpect: 100-continue\r\n\r\n",
}

# Framing no server may take as a request: each must be answered 4xx at once (never 5xx, never
# a hang, never a thread left spinning).
_CHUNKED = BEGIN + AUTH + b"Transfer-Encoding: chunked\r\n\r\n"
MALFORMED = {
    "chunk_size_negative": _CHUNKED + b"-6\r\nabcdef\r\n0\r\n\r\n",
    "chunk_size_0x": _CHUNKED + b"0x43\r\n" + b"a" * 67 + b"\r\n0\r\n\r\n",
    "chunk_size_underscore": _CHUNKED + b"1_0\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n",
    "chunk_without_crlf": _CHUNKED + b"2\r\n{}XX0\r\n\r\n",
    "chunk_size_not_hex": _CHUNKED + b"zz\r\n{}\r\n0\r\n\r\n",
    "unknown_transfer_coding": BEGIN + AUTH + b"Transfer-Encoding: gzip\r\n\r\n{}",
    "chunked_not_last_coding": BEGIN + AUTH + b"Transfer-Encoding: chunked, gzip\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    "content_length_negative": BEGIN + AUTH + b"Content-Length: -1\r\n\r\n{}",
    "content_length_twice_differing": BEGIN + AUTH + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}x",
    "content_length_not_a_number": BEGIN + AUTH + b"Content-Length: 1e2\r\n\r\n{}",
    "length_and_chunked": BEGIN + AUTH + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    "bad_request_line": b"POST /v1/operations/begin HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    "space_before_colon": BEGIN + AUTH + b"Content-Length : 2\r\n\r\n{}",
    "oversized_head": BEGIN + b"X-Pad: " + b"a" * (80 * 1024) + b"\r\n\r\n",
}


def connect(port, host="127.0.0.1", first_bytes=b""):
    s = socket.create_connection((host, port), timeout=5)
    if first_bytes:
        s.sendall(first_bytes)
    return s


def open_stalls(port, idle=200, partial=100, stalled=40, host="127.0.0.1"):
    """The issue's load: ``idle`` connections that send nothing, ``partial`` heads cut short
    (one byte, half a header line) and ``stalled`` bodies (Content-Length first or last, chunked,
    Expect: 100-continue never followed). Returns the sockets (the caller closes them)."""
    socks = [connect(port, host) for _ in range(idle)]
    heads = (STALLS["partial_head"], STALLS["partial_header_line"])
    socks += [connect(port, host, heads[i % 2]) for i in range(partial)]
    bodies = [STALLS[k] for k in ("stalled_body_length_first", "stalled_body_length_last", "stalled_chunked_body",
                                  "expect_100_no_body")]
    socks += [connect(port, host, bodies[i % len(bodies)]) for i in range(stalled)]
    return socks


def health_under_load(url, port, probes=3, host="127.0.0.1", **load):
    """Seconds each of ``probes`` GET /health took (None: no answer in 10 s) while open_stalls'
    connections are open; also a raw stall oversized head (> 64 KiB that never ends)."""
    socks = open_stalls(port, host=host, **load)
    took = []
    try:
        for _ in range(4):  # heads over 64 KiB that never end: the server must stop reading them
            s = connect(port, host)
            try:
                s.sendall(BEGIN + b"X-Pad: " + b"a" * (80 * 1024))
            except OSError:
                pass  # refused before it was all sent: fine
            socks.append(s)
        time.sleep(0.5)  # every connection is accepted and waiting by now
        for _ in range(probes):
            t0 = time.monotonic()
            try:
                ok = requests.get(f"{url}/health", timeout=10).status_code == 200
            except requests.RequestException:
                ok = False
            took.append(round(time.monotonic() - t0, 3) if ok else None)
    finally:
        for s in socks:
            s.close()
    return took


def answer_to(port, raw, wait=5.0, host="127.0.0.1"):
    """What the server does with ``raw``: {"status": int or None, "closed": bool, "s": seconds,
    "body": first bytes of the final answer's body, "raw": first bytes read}. status None and closed False: it was still waiting."""
    s = connect(port, host)
    s.settimeout(wait)
    t0 = time.monotonic()
    data = b""
    closed = False
    try:
        try:
            s.sendall(raw)
        except OSError:
            pass  # refused while sending (an oversized head): what came back says how
        while not _whole(data):
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            data += chunk
    except (TimeoutError, socket.timeout):
        pass
    except OSError:
        closed = True
    finally:
        s.close()
    status = _final_status(data)
    body = _final(data).split(b"\r\n\r\n", 1)[1][:1000] if status else b""
    return {"status": status, "closed": closed, "s": round(time.monotonic() - t0, 3), "body": body,
            "raw": data[:300]}


def error_code(answer):
    """The ``error.code`` of an answer in the API's error shape, else None."""
    try:
        error = json.loads(answer["body"])["error"]
    except (ValueError, KeyError, TypeError):
        return None
    return error["code"] if isinstance(error, dict) and {"code", "message", "details"} <= set(error) else None


def _whole(data):
    """A final answer's head and its Content-Length of body are in (an interim 100 skipped)."""
    final = _final(data)
    if b"\r\n\r\n" not in final:
        return False
    head, body = final.split(b"\r\n\r\n", 1)
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return len(body) >= min(int(value), 1000)
    return True


def _status(data):
    try:
        return int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def _final(data):
    """The bytes of the final answer (an interim 100 Continue skipped)."""
    while data.startswith(b"HTTP/1.1 100") or data.startswith(b"HTTP/1.0 100"):
        data = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
    return data


def _final_status(data):
    return _status(_final(data))


def group_cpu_s(pgid):
    """CPU seconds (user + system) of every live process in a process group."""
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def idle_cpu_share(pgid, seconds=2.0):
    """The server's CPU share of one core while nobody sends it anything: a spinning thread
    shows as ~1.0."""
    a = group_cpu_s(pgid)
    time.sleep(seconds)
    return round((group_cpu_s(pgid) - a) / seconds, 3)


def probe_all(url, port, pgid, host="127.0.0.1", wait=3.0):
    """Every probe once: {"load": health seconds, "malformed": {case: answer}, "stalls":
    {case: answer after ``wait`` s}, "idle_cpu_share": after all of them}."""
    out = {"load": health_under_load(url, port, host=host)}
    out["malformed"] = {k: answer_to(port, raw, wait, host) for k, raw in MALFORMED.items()}
    out["idle_cpu_share"] = idle_cpu_share(pgid)
    return out


def summary(result):
    """One line per server for a table: load probes, malformed answers, spinning."""
    load = result["load"]
    bad = {k: (a["status"], a["closed"]) for k, a in result["malformed"].items()
           if not (a["status"] and 400 <= a["status"] < 500)}
    shaped = sum(1 for a in result["malformed"].values() if error_code(a))
    return {"health_s_under_load": load, "health_ok": all(t is not None and t < 1.0 for t in load),
            "malformed_4xx": len(result["malformed"]) - len(bad), "malformed_total": len(result["malformed"]),
            "malformed_in_error_shape": shaped, "malformed_not_4xx": bad,
            "idle_cpu_share": result["idle_cpu_share"]}
