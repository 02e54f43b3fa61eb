# What pandas, matplotlib and tqdm decide from whether IPython is there:
# tqdm.auto's class (a notebook's widget or the console's), pandas' idea
# of a notebook front end and its table formatter, matplotlib's backend
# and the interactive hook of pyplot. The kernel's and e2e's tests of the
# IPython.display stand-in run it with and without the stand-in.
import sys, tqdm.auto, pandas as pd, matplotlib, matplotlib.pyplot as plt
from pandas.io.formats import console
print('tqdm.auto:', tqdm.auto.tqdm.__module__ + '.' + tqdm.auto.tqdm.__name__)
print('pandas front end:', console.in_ipython_frontend())
pd.set_option('display.html.table_schema', True)
pd.reset_option('display.html.table_schema')
print('matplotlib:', matplotlib.get_backend(), matplotlib.is_interactive(), getattr(plt, '_REPL_DISPLAYHOOK', None))
print('IPython loaded:', 'IPython' in sys.modules)
