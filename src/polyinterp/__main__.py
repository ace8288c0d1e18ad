from polyinterp.cli import run

run()
