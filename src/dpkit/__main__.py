from dpkit.cli import app

app()
