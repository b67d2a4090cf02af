"""Typer apps: parse, call one service, render. No logic of their own."""
