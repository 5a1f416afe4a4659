from runner.github.commands import main

raise SystemExit(main())
