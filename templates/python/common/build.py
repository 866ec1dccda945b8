#!/usr/bin/env python3
"""Builds app.py into dist/{{name}}.wasm, world {{world}}: `python3 build.py`.

The first build makes a virtual environment in .venv/ and installs the pinned
componentize-py (requirements.txt) there. The plugin can import the standard
library, the SDK (vendor/wasm_informer) and the other modules beside app.py.
"""
import shutil
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv"
TOOL = VENV / "bin" / "componentize-py"
OUT = HERE / "dist" / "{{name}}.wasm"


def main() -> int:
    if not TOOL.exists():
        print("build: installing componentize-py into .venv (first build only)", file=sys.stderr)
        venv.create(VENV, with_pip=True)
        pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run(pip + ["-r", str(HERE / "requirements.txt")], check=True)
    OUT.parent.mkdir(exist_ok=True)
    # The plugin's own modules (every .py beside app.py, build.py aside) and
    # the SDK are on its import path; .venv and the build output are not.
    src = HERE / "build" / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    for module in HERE.glob("*.py"):
        if module.name != "build.py":
            shutil.copy2(module, src / module.name)
    cmd = [str(TOOL), "-d", str(HERE / "wit"), "-w", "{{world}}", "componentize",
           "-p", str(src), "-p", str(HERE / "vendor"), "app", "-o", str(OUT)]
    r = subprocess.run(cmd, cwd=src, stdout=subprocess.DEVNULL)
    if r.returncode != 0:
        print(f"build: componentize-py failed (exit {r.returncode})", file=sys.stderr)
        return 1
    print(f"build: app.py -> {OUT.relative_to(HERE)} ({OUT.stat().st_size // 1024} KiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
