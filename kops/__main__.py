from kops.cli.main import main

main()
