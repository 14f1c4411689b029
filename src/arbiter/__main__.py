from arbiter.cli import main

raise SystemExit(main())
