from pld_cli.cli.app import main

main()
