"""The regression tracker: ``records`` turns thread claims and ``#regzbot`` commands
(``regzbot``, pure) into regression records with a lifecycle; ``trust`` says who may move them;
``kernel_tree`` reads culprits and MAINTAINERS from local kernel trees; ``query`` answers
"open regressions in mm/"; ``entry`` renders a record as the tracker entry; ``events`` reads the
records' history as events for notifications."""
