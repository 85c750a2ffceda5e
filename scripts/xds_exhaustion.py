"""Resource-exhaustion attacks on admitpilot's xDS port, each against a fresh `admitpilot serve` on 127.0.0.1.

In:  --binary PATH (the admitpilot to attack), --idle-wait SECONDS (how long the `idle` attack waits), --only NAME.
     Run from the repository root (serves examples/gateway), with .venv/bin/python (grpcio, xds-protos, h2);
     scripts/bench-xds-exhaustion does both.
Out: one JSON object per attack on stdout (name, figures; memory as /proc/PID/status VmRSS and VmHWM in KiB), then
     a markdown table, one row per attack, for BENCHMARKS.md. Progress goes to stderr.

Attacks (every loop is bounded in count and time; only 127.0.0.1 is ever connected to):
  streams      8 HTTP/2 streams on one connection, each declaring a 64 MiB gRPC message and sending 60 MiB of it
  nacks        one ADS stream NACKing a CDS response 4 times with a 50 MB error_detail message
  nack-flood   the same 200 times with 3.9 MB (just under the 4 MiB request limit)
  idle         300 plaintext TCP and 300 TLS (handshake done) connections that send nothing for --idle-wait s
  connections  up to 2,000 TCP connections that each send the HTTP/2 preface + SETTINGS, held 2 s
"""

import argparse
import errno
import json
import os
import queue
import re
import resource
import select
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

MiB = 1 << 20
ADS_PATH = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
CDS_TYPE = "type.googleapis.com/envoy.config.cluster.v3.Cluster"


def log(*parts):
    print("[xds-exhaustion]", *parts, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# The server under attack


def free_ports(count):
    """`count` distinct free ports on 127.0.0.1 (each bound to port 0 first, then released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def memory(pid):
    """The process's resident set now and its peak: {"rss_kib", "hwm_kib"} from /proc/PID/status."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return {"rss_kib": fields["VmRSS"], "hwm_kib": fields["VmHWM"]}


def open_files_limit(pid):
    """The soft `Max open files` of a process, from /proc/PID/limits."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return None


def self_signed_cert(directory):
    """A throwaway certificate and key for 127.0.0.1/localhost, made with the openssl CLI: (cert, key) paths."""
    cert, key = os.path.join(directory, "xds.crt"), os.path.join(directory, "xds.key")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True)
    return cert, key


class Server:
    """`admitpilot serve --config-dir examples/gateway` on free 127.0.0.1 ports, ready on enter, killed on exit.
    With tls=True the xDS port serves TLS (a fresh self-signed certificate) with --xds-auth none."""

    READY_TIMEOUT = 120

    def __init__(self, binary, tls=False):
        self.binary, self.tls = binary, tls

    def __enter__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="xds-exhaustion-")
        webhook, self.admin_port, self.xds_port = free_ports(3)
        cmd = [self.binary, "serve", "--config-dir", "examples/gateway",
               "--webhook-addr", f"127.0.0.1:{webhook}", "--admin-addr", f"127.0.0.1:{self.admin_port}",
               "--xds-addr", f"127.0.0.1:{self.xds_port}"]
        if self.tls:
            cert, key = self_signed_cert(self.dir.name)
            cmd += ["--xds-tls-cert", cert, "--xds-tls-key", key, "--xds-auth", "none"]
        self.log_path = os.path.join(self.dir.name, "server.log")
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_ready(self):
        deadline = time.monotonic() + self.READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.tail()}")
            try:
                if self.get("/readyz", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)  # polling interval, not a wait for an effect
        raise RuntimeError(f"not ready after {self.READY_TIMEOUT} s: {self.tail()}")

    def get(self, path, timeout=30):
        """GET on the admin port: (status, body bytes)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}{path}", timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def alive(self):
        return self.proc.poll() is None

    def tail(self, lines=20):
        with open(self.log_path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.log_file.close()
        self.dir.cleanup()


def still_open(sock):
    """True while the server holds `sock` open: drains whatever it sent, without blocking; EOF or reset = closed."""
    sock.setblocking(False)
    try:
        for _ in range(1000):  # bounded: at most ~64 MB drained per check
            if not sock.recv(65536):
                return False
        return True
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return True
    except OSError:  # ConnectionResetError, ssl.SSLError (EOF without close_notify…)
        return False


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------------------------
# 1. streams: 8 streams on one HTTP/2 connection, each sending 60 MiB of a declared 64 MiB message


def attack_streams(args):
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions

    streams_wanted, declared, body = 8, 64 * MiB, 60 * MiB
    send_deadline_s, hold_s = 180, 2
    with Server(args.binary) as srv:
        before = memory(srv.pid)
        sock = socket.create_connection(("127.0.0.1", srv.xds_port), timeout=30)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        state = {"settings": None, "goaway": None, "eof": False}
        streams = {}  # stream id -> figures

        def pump(timeout):
            """Reads and handles what the server sent within `timeout` s (flow control, resets, trailers…)."""
            if state["eof"]:
                time.sleep(timeout)  # nothing more can arrive
                return
            if not select.select([sock], [], [], timeout)[0]:
                return
            try:
                data = sock.recv(1 << 20)
            except OSError as e:
                data, state["eof"] = b"", f"recv: {e}"
            if not data:
                state["eof"] = state["eof"] or "EOF"
                for s in streams.values():
                    s["stopped"] = s["stopped"] or "connection closed"
                return
            for ev in conn.receive_data(data):
                s = streams.get(getattr(ev, "stream_id", None))
                if isinstance(ev, h2.events.RemoteSettingsChanged):
                    changed = ev.changed_settings.items()
                    state["settings"] = {getattr(k, "name", str(k)): v.new_value for k, v in changed}
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    state["goaway"] = {"error_code": int(ev.error_code), "last_stream_id": ev.last_stream_id}
                    for s in streams.values():
                        s["stopped"] = s["stopped"] or "GOAWAY"
                elif isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif s is None:
                    continue
                elif isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    headers = dict(ev.headers)
                    if ":status" in headers:
                        s["http_status"] = headers[":status"]
                    if "grpc-status" in headers:
                        s["grpc_status"] = headers["grpc-status"]
                        s["grpc_message"] = headers.get("grpc-message", "")[:200]
                        s["stopped"] = s["stopped"] or "grpc-status"
                elif isinstance(ev, h2.events.StreamEnded):
                    s["stopped"] = s["stopped"] or "ended"
                elif isinstance(ev, h2.events.StreamReset):
                    s["reset_code"] = int(ev.error_code)
                    s["stopped"] = s["stopped"] or f"RST_STREAM {ev.error_code.name}"
            out = conn.data_to_send()
            if out:
                sock.sendall(out)

        deadline = time.monotonic() + 10
        while state["settings"] is None and not state["eof"] and time.monotonic() < deadline:
            pump(0.5)

        headers = [(":method", "POST"), (":scheme", "http"), (":authority", f"127.0.0.1:{srv.xds_port}"),
                   (":path", ADS_PATH), ("content-type", "application/grpc"), ("te", "trailers")]
        not_opened = None
        for _ in range(streams_wanted):
            sid = conn.get_next_available_stream_id()
            try:
                conn.send_headers(sid, headers)
            except h2.exceptions.TooManyStreamsError:
                not_opened = "server's MAX_CONCURRENT_STREAMS reached"
                break
            # Each stream sends the 5-byte gRPC prefix (uncompressed, length `declared`), then `body` zero bytes.
            streams[sid] = {"stream_id": sid, "body_bytes_sent": 0, "prefix_sent": False, "stopped": None}
        sock.sendall(conn.data_to_send())

        zeros = bytes(conn.max_outbound_frame_size)
        prefix = b"\x00" + declared.to_bytes(4, "big")
        started = time.monotonic()
        send_error = None
        while time.monotonic() - started < send_deadline_s and not state["eof"]:
            active = [s for s in streams.values() if not s["stopped"] and s["body_bytes_sent"] < body]
            if not active:
                break
            sent_any = False
            try:
                for s in active:
                    sid = s["stream_id"]
                    if not s["prefix_sent"] and conn.local_flow_control_window(sid) >= len(prefix):
                        conn.send_data(sid, prefix)
                        s["prefix_sent"] = True
                    while s["prefix_sent"] and s["body_bytes_sent"] < body:
                        n = min(conn.local_flow_control_window(sid), len(zeros), body - s["body_bytes_sent"])
                        if n <= 0:
                            break
                        conn.send_data(sid, zeros[:n])
                        s["body_bytes_sent"] += n
                        sent_any = True
                    sock.sendall(conn.data_to_send())
            except h2.exceptions.StreamClosedError as e:  # the server closed it between two reads
                streams[e.stream_id]["stopped"] = streams[e.stream_id]["stopped"] or "closed"
            except (h2.exceptions.ProtocolError, OSError) as e:  # OSError: the server stopped reading for 30 s
                send_error = f"{type(e).__name__}: {e}"
                break
            pump(0 if sent_any else 1.0)  # wait for WINDOW_UPDATEs only when every window is empty
        send_seconds = round(time.monotonic() - started, 1)

        hold_end = time.monotonic() + hold_s  # keep the connection open, still answering pings and settings
        while time.monotonic() < hold_end:
            pump(max(0.0, hold_end - time.monotonic()))
        after = memory(srv.pid)
        sock.close()

        for s in streams.values():
            s.pop("prefix_sent")
            s["stopped"] = s["stopped"] or ("sent everything" if s["body_bytes_sent"] >= body else "deadline")
        accepted = sum(1 for s in streams.values() if s.get("reset_code") != 7)  # 7 = REFUSED_STREAM
        return {
            "name": "streams",
            "streams_opened": len(streams), "streams_accepted": accepted, "not_opened": not_opened,
            "declared_message_bytes": declared, "body_bytes_per_stream": body,
            "total_body_bytes_sent": sum(s["body_bytes_sent"] for s in streams.values()),
            "server_settings": state["settings"], "goaway": state["goaway"], "connection_end": state["eof"] or None,
            "send_error": send_error, "send_seconds": send_seconds, "streams": list(streams.values()),
            "memory_before": before, "memory_after": after, "server_alive": srv.alive(),
        }


# ---------------------------------------------------------------------------------------------------------------
# 2. nacks: one ADS stream, 4 NACKs of one CDS response, each with a 50 MB error message


def attack_nacks(args, name="nacks", nacks=4, message_bytes=50_000_000):
    """One stream NACKs its first CDS response `nacks` times with an error text of `message_bytes` each."""
    import grpc
    from envoy.config.core.v3 import base_pb2
    from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
    # The example gateway's pods (examples/gateway/gateway.yaml selects higress=higress-system-higress-gateway);
    # README: node metadata NAMESPACE and LABELS, id router~IP~POD.NS~NS.svc.cluster.local.
    node = base_pb2.Node(id="router~10.0.0.1~gw.higress-system~higress-system.svc.cluster.local", cluster="gw")
    node.metadata.update({"NAMESPACE": "higress-system", "LABELS": {"higress": "higress-system-higress-gateway"}})

    def nack_count(srv):
        """admitpilot_xds_nacks_total{type="cds"} from /metrics (0 when absent)."""
        _, text = srv.get("/metrics")
        m = re.search(rb'^admitpilot_xds_nacks_total\{type="cds"\} (\d+)', text, re.M)
        return int(m.group(1)) if m else 0

    with Server(args.binary) as srv:
        before = memory(srv.pid)
        syncz_before = len(srv.get("/debug/syncz")[1])
        channel = grpc.insecure_channel(f"127.0.0.1:{srv.xds_port}", options=[
            ("grpc.max_send_message_length", 256 * MiB), ("grpc.max_receive_message_length", 256 * MiB)])
        requests, responses = queue.Queue(), queue.Queue()
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
            iter(requests.get, None))

        def read():  # every response, then ("end", status code, details) when the stream ends
            try:
                for r in call:
                    responses.put(r)
                responses.put(("end", "OK", ""))
            except grpc.RpcError as e:
                responses.put(("end", e.code().name, (e.details() or "")[:200]))
        threading.Thread(target=read, daemon=True).start()

        try:
            requests.put(discovery_pb2.DiscoveryRequest(node=node, type_url=CDS_TYPE))
            first = responses.get(timeout=30)
            if isinstance(first, tuple):
                raise RuntimeError(f"stream ended before the first response: {first}")
            nack = discovery_pb2.DiscoveryRequest(version_info="", response_nonce=first.nonce, type_url=CDS_TYPE)
            nack.error_detail.code = 3  # INVALID_ARGUMENT
            nack.error_detail.message = "x" * message_bytes
            for _ in range(nacks):
                requests.put(nack)

            # Wait until the server has counted the NACKs or ended the stream (60 s at most).
            started, ended, later = time.monotonic(), None, 0
            while time.monotonic() - started < 60:
                try:
                    item = responses.get(timeout=0.5)
                    if isinstance(item, tuple):
                        ended = {"code": item[1], "details": item[2]}
                        break
                    later += 1
                except queue.Empty:
                    pass
                if nack_count(srv) >= nacks or not srv.alive():
                    break
            waited = round(time.monotonic() - started, 1)
            counted = nack_count(srv) if srv.alive() else None
            after = memory(srv.pid) if srv.alive() else None
            syncz_status, syncz = srv.get("/debug/syncz", timeout=120) if srv.alive() else (None, b"")
        finally:
            requests.put(None)
            call.cancel()
            channel.close()
        return {
            "name": name,
            "first_response": {"version_info": first.version_info, "nonce": first.nonce,
                               "resources": len(first.resources), "bytes": first.ByteSize()},
            "nacks_sent": nacks, "error_message_bytes": message_bytes, "nacks_counted": counted,
            "responses_after_nacks": later, "stream_ended_by_server": ended, "waited_seconds": waited,
            "syncz_bytes_before": syncz_before, "syncz_status": syncz_status, "syncz_bytes_after": len(syncz),
            "memory_before": before, "memory_after": after, "server_alive": srv.alive(),
        }


# ---------------------------------------------------------------------------------------------------------------
# 3. idle: 300 silent plaintext and 300 silent TLS connections, still held after --idle-wait s?


def attack_idle(args):
    count, sample_s = 300, 10
    with Server(args.binary) as plain_srv, Server(args.binary, tls=True) as tls_srv:
        before = {"plaintext": memory(plain_srv.pid), "tls": memory(tls_srv.pid)}
        plain, tls, errors = [], [], {}
        try:
            for _ in range(count):
                try:
                    plain.append(socket.create_connection(("127.0.0.1", plain_srv.xds_port), timeout=10))
                except OSError as e:
                    errors[f"plaintext {e}"] = errors.get(f"plaintext {e}", 0) + 1
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            alpn = None
            for _ in range(count):
                try:
                    raw = socket.create_connection(("127.0.0.1", tls_srv.xds_port), timeout=10)
                    s = ctx.wrap_socket(raw, server_hostname="localhost")  # handshake completes here
                    alpn = alpn or s.selected_alpn_protocol()
                    tls.append(s)
                except OSError as e:
                    errors[f"tls {e}"] = errors.get(f"tls {e}", 0) + 1
            opened = {"plaintext": len(plain), "tls": len(tls)}
            log(f"idle: {opened} connections open, waiting {args.idle_wait} s")

            # Wait --idle-wait s; every `sample_s` s note how many are still open (only changes are kept).
            started, timeline, last = time.monotonic(), [], None
            while True:
                elapsed = time.monotonic() - started
                if elapsed >= args.idle_wait:
                    break
                time.sleep(min(sample_s, args.idle_wait - elapsed))  # the attack is the waiting
                plain, tls = [s for s in plain if still_open(s)], [s for s in tls if still_open(s)]
                now = (len(plain), len(tls))
                if now != last:
                    timeline.append({"t_s": round(time.monotonic() - started), "plaintext": now[0], "tls": now[1]})
                    last = now
            after = {"plaintext": memory(plain_srv.pid), "tls": memory(tls_srv.pid)}
        finally:
            close_all(plain + tls)
        return {
            "name": "idle",
            "idle_wait_seconds": args.idle_wait, "opened": opened, "tls_alpn": alpn, "open_errors": errors,
            "still_open": {"plaintext": len(plain), "tls": len(tls)},
            "closed_by_server": {"plaintext": opened["plaintext"] - len(plain), "tls": opened["tls"] - len(tls)},
            "timeline": timeline, "memory_before": before, "memory_after": after,
            "server_alive": {"plaintext": plain_srv.alive(), "tls": tls_srv.alive()},
        }


# ---------------------------------------------------------------------------------------------------------------
# 4. connections: up to 2,000 connections sending the HTTP/2 preface + SETTINGS, held 2 s


def attack_connections(args):
    import h2.connection

    wanted, open_deadline_s, hold_s = 2000, 60, 2
    client = h2.connection.H2Connection()
    client.initiate_connection()
    preface = client.data_to_send()  # "PRI * HTTP/2.0…" + an empty-ish SETTINGS frame
    with Server(args.binary) as srv:
        before = memory(srv.pid)
        socks, errors, stop = [], {}, "reached the count"
        started = time.monotonic()
        try:
            for _ in range(wanted):
                if time.monotonic() - started > open_deadline_s:
                    stop = f"{open_deadline_s} s deadline"
                    break
                try:
                    s = socket.create_connection(("127.0.0.1", srv.xds_port), timeout=5)
                except OSError as e:
                    if e.errno == errno.EMFILE:
                        stop = "EMFILE (client's open-file limit)"
                        break
                    key = errno.errorcode.get(e.errno, str(e))
                    errors[key] = errors.get(key, 0) + 1
                    continue
                socks.append(s)
                try:
                    s.sendall(preface)
                except OSError as e:
                    key = f"send {errno.errorcode.get(e.errno, e)}"
                    errors[key] = errors.get(key, 0) + 1
            open_seconds = round(time.monotonic() - started, 1)
            time.sleep(hold_s)  # the attack is holding them
            still = [s for s in socks if still_open(s)]
            after = memory(srv.pid)
            return {
                "name": "connections",
                "wanted": wanted, "opened": len(socks), "stopped_because": stop, "connect_errors": errors,
                "open_seconds": open_seconds, "held_seconds": hold_s,
                "still_open": len(still), "closed_by_server": len(socks) - len(still),
                "client_nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                "server_nofile": open_files_limit(srv.pid),
                "memory_before": before, "memory_after": after, "server_alive": srv.alive(),
            }
        finally:
            close_all(socks)


# ---------------------------------------------------------------------------------------------------------------
# Report


def mib(kib):
    return f"{kib / 1024:.1f}"


def mem_cell(before, after):
    if after is None:
        return f"{mib(before['rss_kib'])} MiB → (server gone)"
    return f"{mib(before['rss_kib'])} → {mib(after['rss_kib'])} MiB (peak {mib(after['hwm_kib'])})"


def table_row(r):
    """One BENCHMARKS.md row: | attack | what the server did | server RSS before → after (peak) |."""
    if r["name"] == "streams":
        per = ", ".join(f"{s['body_bytes_sent'] / MiB:.1f}" for s in r["streams"])
        ends = sorted({s["stopped"] for s in r["streams"]})
        what = (f"8 streams × 60 MiB of a declared 64 MiB message: {r['streams_accepted']} accepted, "
                f"MiB sent per stream [{per}], outcome: {'; '.join(ends)}")
        return f"| streams | {what} | {mem_cell(r['memory_before'], r['memory_after'])} |"
    if r["name"] in ("nacks", "nack-flood"):
        ended = r["stream_ended_by_server"]
        what = (f"{r['nacks_sent']} CDS NACKs × {r['error_message_bytes'] / 1e6:g} MB error_detail: "
                f"{r['nacks_counted']} counted, stream "
                f"{'ended ' + ended['code'] if ended else 'kept open'}, /debug/syncz "
                f"{r['syncz_bytes_before']:,} → {r['syncz_bytes_after']:,} bytes")
        return f"| {r['name']} | {what} | {mem_cell(r['memory_before'], r['memory_after'])} |"
    if r["name"] == "idle":
        o, s = r["opened"], r["still_open"]
        what = (f"silent connections after {r['idle_wait_seconds']} s: plaintext {s['plaintext']}/{o['plaintext']} "
                f"still open, TLS (handshake done) {s['tls']}/{o['tls']} still open")
        mem = (f"plaintext {mem_cell(r['memory_before']['plaintext'], r['memory_after']['plaintext'])}; "
               f"TLS {mem_cell(r['memory_before']['tls'], r['memory_after']['tls'])}")
        return f"| idle | {what} | {mem} |"
    what = (f"{r['opened']} of {r['wanted']} connections opened ({r['stopped_because']}) with preface + SETTINGS: "
            f"{r['still_open']} still open after {r['held_seconds']} s, {r['closed_by_server']} closed")
    return f"| connections | {what} | {mem_cell(r['memory_before'], r['memory_after'])} |"


def attack_nack_flood(args):
    """200 NACKs of 3.9 MB each, just under the 4 MiB request limit: what a stream NACKing again and again costs."""
    return attack_nacks(args, name="nack-flood", nacks=200, message_bytes=3_900_000)


ATTACKS = {"streams": attack_streams, "nacks": attack_nacks, "nack-flood": attack_nack_flood, "idle": attack_idle,
           "connections": attack_connections}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", required=True)
    p.add_argument("--idle-wait", type=float, default=300)
    p.add_argument("--only", choices=sorted(ATTACKS))
    args = p.parse_args()
    args.binary = os.path.abspath(args.binary)
    if args.idle_wait.is_integer():
        args.idle_wait = int(args.idle_wait)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # room for 2,000 sockets, if allowed
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    except (ValueError, OSError):
        pass

    rows = []
    for name, attack in ATTACKS.items():
        if args.only and name != args.only:
            continue
        log(f"{name}: starting")
        result = attack(args)
        print(json.dumps(result), flush=True)
        rows.append(table_row(result))
    print("\n| Attack | What the server did | Server RSS before → after (peak) |\n|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
