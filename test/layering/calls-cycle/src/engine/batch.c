/* two files of one folder that call each other, through no header */
int run_task(int n);
int run_batch(int n);

int
run_batch(int n)
{
	return n > 0 ? run_task(n - 1) : 0;
}
