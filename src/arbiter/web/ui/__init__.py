"""Page handlers: parse the form, call one service in the threadpool, render."""
