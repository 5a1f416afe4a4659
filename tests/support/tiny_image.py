"""A few-MB image for the Pod tests, made from this machine's own binaries.

No registry is reachable here, and the kubernetes tests need only a shell, coreutils and
tar, so the image is those binaries and the libraries `ldd` names, imported with
`podman import`. Its tag is the hash of its contents, so it is built once per machine.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

TOOLS = (
    "sh", "bash", "sleep", "cat", "mkdir", "rm", "dirname", "wc", "timeout", "env", "mv",
    "ls", "tar", "head", "id", "touch", "seq", "true", "false", "ln", "printf", "yes",
    "chmod", "kill", "ps", "test", "tr", "rmdir", "mkfifo",
)  # fmt: skip
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_LIB = re.compile(r"(/\S+\.so[^\s]*)")


def _files(without: tuple[str, ...] = ()) -> dict[str, Path]:
    """Path in the image -> host file."""
    found: dict[str, Path] = {}
    for tool in (t for t in TOOLS if t not in without):
        where = shutil.which(tool)
        if where is None:
            continue
        real = Path(where).resolve()
        found[f"usr/bin/{tool}"] = real
        out = subprocess.run(["ldd", str(real)], capture_output=True, text=True, check=False)
        for lib in _LIB.findall(out.stdout):
            found[lib.lstrip("/")] = Path(lib).resolve()
    return found


def _rootfs(files: dict[str, Path]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        def add_link(name: str, target: str) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)

        def add_text(name: str, text: str) -> None:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))

        targets = {
            (f"usr/{name}" if name.split("/")[0] in ("lib", "lib64") else name): host
            for name, host in files.items()
        }
        dirs = {"usr", "usr/bin", "usr/lib", "usr/lib64", "etc", "work", "proc", "sys", "dev"}
        dirs |= {"root", "home"}
        for name in targets:
            parts = name.split("/")[:-1]
            dirs |= {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
        for d in sorted(dirs):
            add_dir(d)
        add_dir("tmp", 0o1777)
        add_dir("home/user", 0o777)
        for link in ("bin", "sbin", "lib", "lib64"):
            add_link(link, "usr/bin" if link.endswith("bin") else f"usr/{link}")
        add_text("etc/passwd", "root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n")
        add_text("etc/group", "root:x:0:\nuser:x:1000:\n")
        for name, host in sorted(targets.items()):
            info = tar.gettarinfo(str(host), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with host.open("rb") as fh:
                tar.addfile(info, fh)
    return buf.getvalue()


def ensure(without: tuple[str, ...] = ()) -> str:
    """The image's tag, imported into podman's store if missing. `without`: tools left
    out (`("bash",)`: an image with `sh` only, as busybox ones are)."""
    files = _files(without)
    digest = hashlib.sha256()
    for name, host in sorted(files.items()):
        digest.update(name.encode() + b"\0" + host.read_bytes())
    tag = f"localhost/runner-k8s-test:{digest.hexdigest()[:12]}"
    env = {**os.environ, "CONTAINERS_CONF": os.devnull}
    have = subprocess.run(["podman", "image", "exists", tag], env=env, check=False)
    if have.returncode != 0:
        subprocess.run(
            ["podman", "import", "-q", "-c", f"ENV PATH={PATH}", "-", tag],
            input=_rootfs(files),
            env=env,
            check=True,
            capture_output=True,
        )
    return tag
