from archguard._cli import main

raise SystemExit(main())
