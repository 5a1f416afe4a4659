from runner.github.run_step import main

raise SystemExit(main())
