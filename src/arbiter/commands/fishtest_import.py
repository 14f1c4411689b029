"""The `arbiter import fishtest` command: open the target, import, check, report."""

import argparse
import sys
import time
from pathlib import Path

from arbiter.importer.check import check_import
from arbiter.importer.dump import DumpError, find_collections
from arbiter.importer.fishtest import FishtestImport, ImportOptions, TargetNotEmpty
from arbiter.importer.progress import Progress
from arbiter.runtime.bootstrap import open_storage, password_hasher, settings_from_args
from arbiter.runtime.settings import SettingsError
from arbiter.storage.errors import DatabaseNotOpened

EXIT_DIFFERENCES = 1
EXIT_REFUSED = 2
EXIT_INTERRUPTED = 130


def import_command(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
        dump_dir = Path(args.dump_dir)
        files = find_collections(dump_dir)
        nets_dir = Path(args.nets_dir) if args.nets_dir else _default_nets_dir(dump_dir)
        options = ImportOptions(merge=args.merge, nets_dir=nets_dir)
        with open_storage(settings) as storage:
            importer = FishtestImport(
                storage,
                files,
                hasher=password_hasher(settings),
                options=options,
                progress=Progress(),
            )
            started = time.perf_counter()
            report = importer.run()
            print("\n".join(report.lines()))
            print(f"import took {time.perf_counter() - started:.1f} s")
            if args.no_check or "runs" not in files:
                return 0
            started = time.perf_counter()
            check = check_import(storage, files["runs"], files.get("actions"))
            print("\n".join(check.lines()))
            print(f"check took {time.perf_counter() - started:.1f} s")
            return EXIT_DIFFERENCES if check.differences or check.missing else 0
    except (DumpError, TargetNotEmpty, SettingsError, DatabaseNotOpened) as error:
        print(f"arbiter: {error}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print(
            "\narbiter: interrupted; the batches committed are kept: "
            "run the same command again to continue",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def _default_nets_dir(dump_dir: Path) -> Path | None:
    """Net files beside the dump, in `nn/` (Fishtest's own directory name)."""
    candidate = dump_dir / "nn"
    return candidate if candidate.is_dir() else None
