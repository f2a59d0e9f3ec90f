from league.table import main

main()
