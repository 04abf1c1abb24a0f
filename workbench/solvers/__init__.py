"""Solvers: from a seeded problem to a final response plus transcript."""

from workbench.solvers.base import Solver, SolverOutput, SolverWorker
from workbench.solvers.chat import ChatSolver
from workbench.solvers.simple import SimpleSolver

__all__ = ["ChatSolver", "SimpleSolver", "Solver", "SolverOutput", "SolverWorker"]
