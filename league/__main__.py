from league.cli import main

main()
