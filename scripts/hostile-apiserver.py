#!/usr/bin/env python3
"""Probes the embedded API server (`gpu-claims demo --serve`) as a hostile
client would (issue 33, item 6), and prints what it answers and what the
process's memory does: the figures of the issue's closing note.

    scripts/hostile-apiserver.py [path/to/gpu-claims]

Each probe prints one line: what was sent, the answers' codes, and the
server's RSS before and after (VmRSS of the process, in MB).
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

BINARY = sys.argv[1] if len(sys.argv) > 1 else "target/debug/gpu-claims"
NS = "default"


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start():
    kc = tempfile.NamedTemporaryFile(suffix=".kubeconfig", delete=False).name
    os.unlink(kc)
    p = subprocess.Popen(
        [BINARY, "demo", "--serve", "--kubeconfig", kc],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not (os.path.exists(kc) and os.path.getsize(kc) > 0):
        if time.time() > deadline or p.poll() is not None:
            sys.exit("the server did not start")
        time.sleep(0.2)
    server = re.search(r"server:\s*(\S+)", open(kc).read()).group(1)
    host, port = server.replace("http://", "").split(":")
    return p, host, int(port)


def call(addr, method, path, body=None):
    c = http.client.HTTPConnection(*addr, timeout=60)
    data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
    c.request(method, path, data, {"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read()
    c.close()
    return r.status, text


def pod(name, amount):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": amount}}}
            ]
        },
    }


def node(name, amount):
    q = {"nvidia.com/gpu": amount}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"capacity": q, "allocatable": q},
    }


def main():
    p, host, port = start()
    addr = (host, port)
    try:
        time.sleep(2)
        for i, amount in enumerate(["-1", "0.5", "abc", ""]):
            code, _ = call(addr, "POST", f"/api/v1/namespaces/{NS}/pods", pod(f"hostile-{i}", amount))
            print(f"pod limits nvidia.com/gpu={amount!r}: {code}")
        for i, amount in enumerate(["-4", "0.5", "abc", ""]):
            code, _ = call(addr, "POST", "/api/v1/nodes", node(f"hostile-{i}", amount))
            print(f"node allocatable nvidia.com/gpu={amount!r}: {code}")

        before = rss_mb(p.pid)
        many = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": NS, "finalizers": ["a"] * 700_000}}
        codes = []
        for i in range(8):
            many["metadata"]["name"] = f"many-{i}"
            codes.append(call(addr, "POST", f"/api/v1/namespaces/{NS}/configmaps", many)[0])
        print(f"8 ConfigMaps of 700,000 finalizers (2.8 MB each): {codes}, RSS {before:.0f} -> {rss_mb(p.pid):.0f} MB")

        big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": NS},
               "data": {"x": "y" * ((1 << 20) + 1)}}
        print(f"ConfigMap of 1 MiB + 1 byte: {call(addr, 'POST', f'/api/v1/namespaces/{NS}/configmaps', big)[0]}")

        before = rss_mb(p.pid)
        long = "n" * 20_000
        for i in range(3000):
            call(addr, "GET", f"/api/v1/namespaces/{long}{i}/configmaps")
        print(f"3,000 GETs naming 20 KB namespaces: RSS {before:.0f} -> {rss_mb(p.pid):.0f} MB")

        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched", "namespace": NS},
               "data": {"x": "y" * (400 << 10)}}
        call(addr, "POST", f"/api/v1/namespaces/{NS}/configmaps", obj)
        watches = []
        for _ in range(20):
            s = socket.create_connection(addr)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(f"GET /api/v1/namespaces/{NS}/configmaps?watch=true HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            watches.append(s)
        time.sleep(1)
        before = rss_mb(p.pid)
        for i in range(25):
            code, text = call(addr, "GET", f"/api/v1/namespaces/{NS}/configmaps/watched")
            cur = json.loads(text)
            cur["data"]["i"] = str(i)
            call(addr, "PUT", f"/api/v1/namespaces/{NS}/configmaps/watched", cur)
        time.sleep(2)
        print(f"20 watches that never read, a 400 KB ConfigMap written 25 times: RSS {before:.0f} -> {rss_mb(p.pid):.0f} MB")
        for s in watches:
            s.close()
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()


if __name__ == "__main__":
    main()
