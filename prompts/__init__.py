"""Prompt templates for pld tasks, installed as the package data of `pld_cli.tasks.templates`."""
