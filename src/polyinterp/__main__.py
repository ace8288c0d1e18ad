from polyinterp.cli import main

raise SystemExit(main())
