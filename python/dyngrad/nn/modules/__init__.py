"""The nn layers, one file per family as torch.nn.modules lays them out (module.Module, container.Sequential,
linear.Linear, rnn.LSTM, sparse.Embedding, activation.MultiheadAttention, ...), so that
`dyngrad.nn.modules.<file>.<Class>` is where torch has `torch.nn.modules.<file>.<Class>`."""
